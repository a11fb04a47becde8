// Package conformance runs a BabelQueue cross-SDK conformance suite against this SDK's real
// code paths: the strict envelope codec ([envelope.Classify], [envelope.Make],
// Encode) and the Pulsar binding's pure functions ([bqpulsar.ProjectProperties],
// [bqpulsar.Reconcile], [bqpulsar.GateVerdict]), the very functions the consumer and the
// publisher call, and the idempotency and schema middleware.
//
// A suite is a directory with a manifest.json and the fixtures it names. [Load] reads it,
// [Suite.Run] runs it as Go subtests (one per block and case), [Suite.Report] writes one
// line per block and case and a summary, for the `bq conformance` command.
//
// # Blocks
//
//   - cases: decode each fixture; valid ones must be accepted with the expected URN, data
//     (compared as values with exact numbers), attempts, lang, schema_version and
//     dead_letter members; invalid ones must be rejected with an [envelope.PoisonError].
//   - pulsar.property_projection: the exact property map of the fixture, key count included.
//   - pulsar.attempts_reconciliation: every case through [bqpulsar.Reconcile].
//   - pulsar.schema_version_gate: every value through [bqpulsar.GateVerdict]; a "decode"
//     verdict also needs the fixture to be accepted.
//   - roundtrip: decode, attempts+1, encode, then compare the preserved members.
//   - data_shape: encode cases build the envelope with [envelope.Make] from a Go map;
//     decode cases check the verdict.
//   - forbidden_keys: decode succeeds with a warning naming the key; a re-encode drops it.
//   - idempotency: dedup_key checks that the fixture's meta.id is the key (the same bytes
//     twice run the handler once, the same trace_id with another meta.id runs it again);
//     every sequences case replays its deliveries through one handler behind
//     [idempotency.Guard.Middleware] on a fresh [idempotency.MemoryStore], checking each
//     run or skip, each outcome, forget_before, and the number of handler runs.
//   - payload_schema (and payload_schema_unicode): the block's schema is compiled with the
//     schema package; each case's data goes through [schema.Middleware] (an invalid one must
//     be dead-lettered with a [schema.ValidationError], the handler not run) and through
//     [schema.Check], the publisher's check, and both must agree with "valid".
//
// Blocks for other brokers (sqs, asb, kafka, artemis, redis, rabbitmq) are reported as
// not applicable, never passed. A block, or a case field, the runner does not understand is
// reported as UNKNOWN and fails the run, unless [WithSkipUnknown] is given: a newer
// manifest is never half-checked silently. A manifest whose schema_version is not
// [ManifestSchemaVersion] is refused.
//
// # Extensions
//
// The module's own suite (testdata/suite) uses three optional fields that this runner
// understands and the canonical manifest does not have:
//
//   - "expect_rule" on an invalid case: the [envelope.Rule] the rejection must name.
//   - "attempts_property" and "expected_counted" on a pulsar.attempts_reconciliation case:
//     a present bq-attempts property value, and the expected counted delivery number.
//   - "expect_preserved_text" on a roundtrip case: pointer → the exact JSON text (without
//     insignificant whitespace) of the re-emitted member, for number spellings such as
//     9007199254740993 or 1.0 that a comparison of values cannot tell apart.
//
// # Running
//
//	go test ./conformance                   # the canonical suite from ../shared when present, and our own
//	go run ./cmd/bq conformance --suite DIR # any suite directory, one line per case
package conformance
