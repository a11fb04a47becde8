// Package pulsar is the Apache Pulsar binding of BabelQueue: it publishes and consumes
// BabelQueue envelopes ([envelope.Envelope]) on Pulsar topics through
// github.com/apache/pulsar-client-go, following the wire contract of the BabelQueue SDKs.
//
// Applications usually import it as bqpulsar, since the client's own package is also
// called pulsar:
//
//	import bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
//
// # The binding's pure functions
//
// The consumer and the conformance runner share these functions, so that what the suite
// checks is what runs in production:
//
//   - [ProjectProperties]: the six bq-* message properties of an envelope.
//   - [ParseAttempts]: the strict parser of the bq-attempts property (ASCII digits only,
//     at most 2147483647).
//   - [GateVerdict]: the bq-schema-version gate, applied before the payload is decoded.
//     Absent or blank (the six ASCII blank characters only) goes on; exactly "1" goes on;
//     anything else is rejected untrimmed.
//   - [Reconcile]: attempts = max(valid bq-attempts, else the body's attempts; Pulsar's
//     0-based redelivery count), and the counted delivery number.
package pulsar
