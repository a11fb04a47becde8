package interop_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

const (
	urnCreated   = "urn:babel:orders:created"
	urnCancelled = "urn:babel:orders:cancelled"
	// traceparent is a W3C trace context, the extra property every SDK is meant to carry.
	traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// richData is a data object with what goes wrong between languages: integers beyond 2^53 and
// beyond 64 bits, a float that is an integer, exponents, unicode beyond the BMP, characters
// HTML escaping would touch, control characters, U+2028/U+2029, nested objects and arrays,
// null, booleans, empty containers and strings.
const richData = `{"big":9007199254740993,"u64":18446744073709551615,"i64min":-9223372036854775808,` +
	`"huge":123456789012345678901234567890,"neg":-42,"zero":0,"half":0.5,"tiny":1.5e-7,"one":1.0,` +
	`"exp":1e+21,"s":"Café — naïve ☕ 😀 日本語","html":"<a href=\"x\">&amp;</a>",` +
	`"ctl":"line1\nline2\ttab\u0001","seps":"\u2028\u2029","nested":{"a":{"b":[1,{"c":null}],"t":true,"f":false}},` +
	`"arr":[],"obj":{},"empty":""}`

// pythonScenarios are the scenarios of the Python peer, in the order they run.
func pythonScenarios() []scenario {
	return []scenario{
		{group: "go-publishes-peer-consumes", name: "values", run: goPublishesValues},
		{group: "go-publishes-peer-consumes", name: "properties", run: goPublishesProperties},
		{group: "go-publishes-peer-consumes", name: "peer-subscribes-at-latest", run: peerSubscribesAtLatest},
		{group: "peer-publishes-go-consumes", name: "values", run: peerPublishesValues},
		{group: "peer-publishes-go-consumes", name: "make-byte-for-byte", run: peerMakeByteForByte},
		{group: "peer-publishes-go-consumes", name: "routing-by-bq-job", run: peerRoutedByProperty},
		{group: "peer-publishes-go-consumes", name: "schema-version-gate", run: peerSchemaGate},
		{group: "peer-publishes-go-consumes", name: "attempts-reconciled", run: peerAttemptsReconciled},
		{group: "peer-publishes-go-consumes", name: "extra-properties-kept", run: peerExtraPropertiesKept},
		{group: "peer-publishes-go-consumes", name: "peer-drops-headers", run: peerDropsHeaders},
		{group: "peer-publishes-go-consumes", name: "peer-writes-nan", run: peerWritesNaN},
		{group: "retry", name: "go-fails-peer-picks-up", run: retryGoToPeer},
		{group: "retry", name: "peer-fails-go-picks-up", run: retryPeerToGo},
		{group: "retry", name: "routing-kept-across", run: retryRoutingKept},
		{group: "retry", name: "peer-retry-reencodes", run: retryPeerReencodes},
		{group: "dead-letter", name: "go-copy-peer-redrive", run: deadLetterGoToPeer},
		{group: "dead-letter", name: "peer-copy-go-redrive", run: deadLetterPeerToGo},
		{group: "dead-letter", name: "peer-copy-lost-without-retention", run: deadLetterPeerNoRetention},
		{group: "dead-letter", name: "go-poison-peer-redrive", run: deadLetterGoPoisonToPeer},
		{group: "dead-letter", name: "peer-poison-go-inspects", run: deadLetterPeerPoisonToGo},
		{group: "dead-letter", name: "peer-poison-retry-loses-body", run: peerPoisonRetryLosesBody},
		{group: "delay", name: "go-delays-peer-consumes", run: delayGoToPeer},
		{group: "delay", name: "peer-delays-go-consumes", impossible: peerCannotDelay},
		{group: "delay", name: "peer-retry-backoff-ignored", run: delayPeerBackoffIgnored},
		{group: "conformance", name: "go-publishes-fixtures", run: conformanceGoToPeer},
		{group: "conformance", name: "peer-publishes-fixtures", run: conformancePeerToGo},
		{group: "conformance", name: "peer-accepts-unacceptable-bodies", run: peerAcceptsUnacceptable},
	}
}

// goPublishesValues: a Go Publisher's message, consumed by the peer's runtime: the peer gets
// the bytes Go put on the wire, the six properties, and job, trace_id, data (exact integers,
// unicode, nested objects), meta and attempts as Go wrote them.
func goPublishesValues(w *world) {
	t := w.t
	col := brokertest.Collect(t, w.client, w.topic)
	trace := uuid.NewString()
	before := time.Now().UnixMilli()
	id, err := w.publisher().Publish(t.Context(), urnCreated, json.RawMessage(richData), bqpulsar.WithTraceID(trace))
	require.NoError(t, err)
	after := time.Now().UnixMilli()
	wire := col.Wait(t, 1, brokertest.WaitLong)[0]

	res := w.peerConsume(map[string]any{"max_messages": 1, "handlers": map[string]string{urnCreated: "ok"}})
	require.Len(t, res.Deliveries, 1)
	require.Len(t, res.Handled, 1, "the peer's handler ran once")
	d, h := res.Deliveries[0], res.Handled[0]
	assert.Equal(t, string(wire.Payload()), string(d.Payload), "the peer receives Go's bytes unchanged")
	assert.Equal(t, sixProps(urnCreated, trace, id, "go", 0), d.Properties)
	assert.Equal(t, urnCreated, d.RouteURN, "the peer routes on bq-job")

	env := decodePy(t, h.EnvelopeJSON)
	assert.Equal(t, urnCreated, env.Job)
	assert.Equal(t, trace, env.TraceID)
	assert.Equal(t, "0", env.Attempts.String())
	assert.Nil(t, env.DeadLetter)
	assert.Equal(t, id, env.Meta["id"])
	assert.Equal(t, w.queue, env.Meta["queue"])
	assert.Equal(t, "go", env.Meta["lang"])
	assert.Equal(t, json.Number("1"), env.Meta["schema_version"])
	created := env.metaInt(t, "created_at")
	assert.True(t, created >= before && created <= after, "meta.created_at %d is in [%d, %d] ms", created, before, after)
	sameJSON(t, richData, h.DataJSON, "the peer's handler got Go's data")
	assert.Contains(t, h.DataJSON, `"big": 9007199254740993`, "an integer beyond 2^53 stays exact")
	assert.Contains(t, h.DataJSON, `"huge": 123456789012345678901234567890`, "an integer beyond 64 bits stays exact")
	sameJSON(t, h.DataJSON, string(env.Data))
}

// goPublishesProperties: the peer sees exactly the six bq-* properties of a plain message, and
// the six plus the caller's extra properties of a message published WithHeaders.
func goPublishesProperties(w *world) {
	t := w.t
	pub := w.publisher()
	trace := uuid.NewString()
	plain, err := pub.Publish(t.Context(), urnCreated, map[string]any{"n": 1}, bqpulsar.WithTraceID(trace))
	require.NoError(t, err)
	headed, err := pub.Publish(t.Context(), urnCancelled, map[string]any{"n": 2}, bqpulsar.WithTraceID(trace),
		bqpulsar.WithHeaders(map[string]string{"traceparent": traceparent, "x-tenant": "acme", "bq-job": "urn:babel:forged"}))
	require.NoError(t, err)

	res := w.peerConsume(map[string]any{"max_messages": 2, "handlers": map[string]string{urnCreated: "ok", urnCancelled: "ok"}})
	require.Len(t, res.Deliveries, 2)
	require.Len(t, res.Handled, 2)
	assert.Equal(t, sixProps(urnCreated, trace, plain, "go", 0), res.Deliveries[0].Properties, "exactly six properties, key count included")
	assert.Equal(t, withProps(sixProps(urnCancelled, trace, headed, "go", 0), "traceparent", traceparent, "x-tenant", "acme"),
		res.Deliveries[1].Properties, "extra properties arrive; a contract key given as a header loses")
	assert.Equal(t, urnCancelled, res.Handled[1].URN)
}

// peerSubscribesAtLatest documents a difference: the peer's PulsarTransport subscribes with
// the client's default position, the latest message, so a worker that subscribes after a job
// was published never sees it. (Our NewConsumer creates a new subscription at the earliest
// message: CONTRACT.md §2.8.) The other scenarios give the peer Earliest explicitly.
func peerSubscribesAtLatest(w *world) {
	t := w.t
	_, err := w.publisher().Publish(t.Context(), urnCreated, map[string]any{"n": 1})
	require.NoError(t, err)
	res := w.peerConsume(map[string]any{
		"max_messages": 1, "timeout": 2, "sdk_position": true,
		"handlers": map[string]string{urnCreated: "ok"},
	})
	assert.Empty(t, res.Deliveries, "%s's new subscription skips the job published before it", w.py.versions)
}

// peerPublishesValues: the peer's runtime publishes; our Consumer gets the peer's bytes and
// six properties, and job, trace_id, data, meta and attempts as the peer wrote them.
func peerPublishesValues(w *world) {
	t := w.t
	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	trace := uuid.NewString()
	before := time.Now().UnixMilli()
	res := w.peerPublish(map[string]any{"mode": "app", "urn": urnCreated, "data_json": richData, "trace_id": trace})
	after := time.Now().UnixMilli()
	require.Len(t, res.Sent, 1)
	require.Len(t, res.IDs, 1)
	sent, id := res.Sent[0], res.IDs[0]

	d := g.next()
	assert.Equal(t, string(sent.Payload), string(d.Payload), "the Go handler gets the peer's bytes unchanged")
	assert.Equal(t, sixProps(urnCreated, trace, id, "python", 0), d.Props)
	assert.Equal(t, sent.Properties, d.Props)
	assert.Equal(t, urnCreated, d.Env.URN())
	assert.Equal(t, trace, d.Env.TraceID)
	assert.Equal(t, 0, d.Env.Attempts)
	assert.Nil(t, d.Env.DeadLetter)
	assert.Equal(t, id, d.Env.Meta.ID)
	assert.Equal(t, w.queue, d.Env.Meta.Queue)
	assert.Equal(t, "python", d.Env.Meta.Lang)
	assert.Equal(t, 1, d.Env.Meta.SchemaVersion)
	assert.True(t, d.Env.Meta.CreatedAt >= before-1000 && d.Env.Meta.CreatedAt <= after,
		"meta.created_at %d is in [%d, %d] ms", d.Env.Meta.CreatedAt, before, after)
	sameJSON(t, richData, string(d.Env.Data))
	assert.Contains(t, string(d.Env.Data), `"big":9007199254740993`, "an integer beyond 2^53 stays exact")
	assert.Contains(t, string(d.Env.Data), `"huge":123456789012345678901234567890`, "an integer beyond 64 bits stays exact")
	assert.Empty(t, g.errors())
}

// peerMakeByteForByte: a body from the peer's EnvelopeCodec.make (with producer meta) reaches
// the Go handler byte for byte; Go's retry changes only attempts, and Go's dead-letter copy is
// that body with attempts and the dead_letter block, with the peer's properties projected.
func peerMakeByteForByte(w *world) {
	t := w.t
	topicCol := brokertest.Collect(t, w.client, w.topic)
	dlqCol := brokertest.Collect(t, w.client, w.dlqTopic())
	g := newGoWorker(t)
	g.start(w, bqpulsar.WithRetry(retry.Policy{MaxAttempts: 2}), // no backoff: no bq-delay on the retry
		g.handle(urnCreated, func(goDelivery) error { return errors.New("go handler failed") }))
	trace := uuid.NewString()
	res := w.peerPublish(map[string]any{
		"mode": "make", "urn": urnCreated, "data_json": richData, "trace_id": trace,
		"meta_json": `{"tenant":"acme","ext":{"acme":{"tier":1}}}`,
	})
	require.Len(t, res.Sent, 1)
	sent := res.Sent[0]
	body := string(sent.Payload)
	require.True(t, strings.HasSuffix(body, `,"attempts":0}`), "the peer writes attempts last: %s", body)
	stem := strings.TrimSuffix(body, `0}`)

	first := g.next()
	assert.Equal(t, body, string(first.Payload), "the Go handler gets the peer's bytes")
	assert.Equal(t, sent.Properties, first.Props)
	second := g.next()
	assert.Equal(t, 1, second.Env.Attempts)

	wire := topicCol.Wait(t, 2, brokertest.WaitLong)
	assert.Equal(t, body, string(wire[0].Payload()))
	assert.Equal(t, stem+`1}`, string(wire[1].Payload()), "Go's retry of the peer's body changes attempts only")
	assert.Equal(t, withProps(sent.Properties, "bq-attempts", "1"), wire[1].Properties())

	dl := dlqCol.Wait(t, 1, brokertest.WaitLong)[0]
	copyBody := string(dl.Payload())
	assert.True(t, strings.HasPrefix(copyBody, stem+`2,"dead_letter":{"reason":"failed","error":"go handler failed",`),
		"Go's dead-letter copy is the peer's body with attempts and the block: %s", copyBody)
	env, err := envelope.Classify(dl.Payload())
	require.NoError(t, err)
	require.NotNil(t, env.DeadLetter)
	assert.Equal(t, w.queue, env.DeadLetter.OriginalQueue)
	assert.Equal(t, 2, env.DeadLetter.Attempts)
	assert.Equal(t, "go", env.DeadLetter.Lang)
	assert.Equal(t, withProps(sent.Properties, "bq-attempts", "2"), dl.Properties())
}

// peerRoutedByProperty: a message the peer publishes with publish_routed (bq-job pinned to
// another URN than the body's) is routed on the property by our Consumer, which reports the
// mismatch; a plain one routes on its URN.
func peerRoutedByProperty(w *world) {
	t := w.t
	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil), g.handle(urnCancelled, nil))
	res := w.peerPublish(
		map[string]any{"mode": "make", "urn": urnCreated, "data_json": `{"n":1}`, "route_urn": urnCancelled},
		map[string]any{"mode": "make", "urn": urnCreated, "data_json": `{"n":2}`},
	)
	require.Len(t, res.Sent, 2)
	assert.Equal(t, urnCancelled, res.Sent[0].Properties["bq-job"], "the peer pins bq-job")

	routed, plain := g.next(), g.next()
	assert.Equal(t, urnCancelled, routed.URN, "the property wins the routing")
	assert.Equal(t, urnCreated, routed.Env.URN(), "the body is not rewritten")
	assert.Equal(t, string(res.Sent[0].Payload), string(routed.Payload))
	assert.Equal(t, urnCreated, plain.URN)
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.Equal(t, [][2]string{{urnCancelled, urnCreated}}, g.mismatches, "EventRoutingMismatch (property, body)")
}

// peerSchemaGate: a body the peer makes with meta.schema_version 2 carries bq-schema-version
// "2" (the peer's projection); our Consumer rejects it before decoding and moves it to the
// dead-letter topic byte for byte with its properties, and goes on with the next message.
func peerSchemaGate(w *world) {
	t := w.t
	dlqCol := brokertest.Collect(t, w.client, w.dlqTopic())
	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	res := w.peerPublish(
		map[string]any{"mode": "make", "urn": urnCreated, "data_json": `{"n":1}`, "schema_version": 2},
		map[string]any{"mode": "make", "urn": urnCreated, "data_json": `{"n":2}`},
	)
	require.Len(t, res.Sent, 2)
	gated := res.Sent[0]
	assert.Equal(t, "2", gated.Properties["bq-schema-version"])

	d := g.next()
	assert.Equal(t, string(res.Sent[1].Payload), string(d.Payload), "only the version 1 message reaches the handler")
	dl := dlqCol.Wait(t, 1, brokertest.WaitLong)[0]
	assert.Equal(t, string(gated.Payload), string(dl.Payload()), "the rejected message is moved byte for byte, no block")
	assert.Equal(t, gated.Properties, dl.Properties())
	g.waitEvent(bqpulsar.EventGateRejected)
	var gateErr bool
	for _, err := range g.errors() {
		gateErr = gateErr || errors.Is(err, bqpulsar.ErrSchemaVersion)
	}
	assert.True(t, gateErr, "an event reports ErrSchemaVersion: %v", g.errors())
	g.quiet(200 * time.Millisecond)
}

// peerAttemptsReconciled: the peer's attempts arrive as bq-attempts and body attempts; our
// Consumer reconciles them with Pulsar's redelivery count after a negative acknowledgement.
func peerAttemptsReconciled(w *world) {
	t := w.t
	g := newGoWorker(t)
	var failed atomic.Bool
	g.start(w,
		bqpulsar.WithRetry(retry.Policy{MaxAttempts: 5, Strategy: retry.Nack}),
		bqpulsar.WithNackRedeliveryDelay(100*time.Millisecond),
		g.handle(urnCreated, nil),
		g.handle(urnCancelled, func(goDelivery) error {
			if failed.CompareAndSwap(false, true) {
				return errors.New("nack me")
			}
			return nil
		}))
	res := w.peerPublish(
		map[string]any{"mode": "make", "urn": urnCreated, "data_json": `{"n":1}`, "attempts": 2},
		map[string]any{"mode": "app", "urn": urnCancelled, "data_json": `{"n":2}`},
	)
	require.Len(t, res.Sent, 2)
	assert.Equal(t, "2", res.Sent[0].Properties["bq-attempts"], "the peer projects the body's attempts")

	seen := map[string][]goDelivery{}
	for range 3 {
		d := g.next()
		seen[d.URN] = append(seen[d.URN], d)
	}
	require.Len(t, seen[urnCreated], 1)
	assert.Equal(t, 2, seen[urnCreated][0].Env.Attempts, "the handler sees the peer's attempts")
	require.Len(t, seen[urnCancelled], 2)
	again := seen[urnCancelled][1]
	assert.Equal(t, uint32(1), again.Redelivery)
	assert.Equal(t, "0", again.Props["bq-attempts"], "a nack changes no property")
	assert.Equal(t, 1, again.Env.Attempts, "attempts = max(bq-attempts, redelivery count)")
}

// peerExtraPropertiesKept: properties the peer's own Pulsar client adds to a message of the
// SDK (traceparent, an application key) reach the Go handler and stay on Go's retry and
// dead-letter copies.
func peerExtraPropertiesKept(w *world) {
	t := w.t
	topicCol := brokertest.Collect(t, w.client, w.topic)
	dlqCol := brokertest.Collect(t, w.client, w.dlqTopic())
	g := newGoWorker(t)
	g.start(w, bqpulsar.WithRetry(retry.Policy{MaxAttempts: 2}), g.handle(urnCreated, func(goDelivery) error { return errors.New("failed") }))
	res := w.peerPublish(map[string]any{
		"mode": "client", "urn": urnCreated, "data_json": `{"n":1}`,
		"extra_properties": map[string]string{"traceparent": traceparent, "x-tenant": "acme"},
	})
	require.Len(t, res.Sent, 1)
	sent := res.Sent[0]
	require.Len(t, sent.Properties, 8)

	assert.Equal(t, sent.Properties, g.next().Props)
	g.next()
	wire := topicCol.Wait(t, 2, brokertest.WaitLong)
	assert.Equal(t, withProps(sent.Properties, "bq-attempts", "1"), wire[1].Properties(), "the retry keeps them")
	dl := dlqCol.Wait(t, 1, brokertest.WaitLong)[0]
	assert.Equal(t, withProps(sent.Properties, "bq-attempts", "2"), dl.Properties(), "the dead-letter copy keeps them")
}

// peerDropsHeaders documents a limit of the peer: babelqueue's PulsarTransport is no
// HeaderPublisher, so BabelQueue.publish_with_headers falls back to publish and the headers
// (a traceparent) never reach the wire. When this fails, the peer carries them now: update
// the README's compatibility table.
func peerDropsHeaders(w *world) {
	t := w.t
	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	trace := uuid.NewString()
	res := w.peerPublish(map[string]any{
		"mode": "app-headers", "urn": urnCreated, "data_json": `{"n":1}`, "trace_id": trace,
		"headers": map[string]string{"traceparent": traceparent, "x-tenant": "acme"},
	})
	require.Len(t, res.IDs, 1)
	d := g.next()
	assert.Equal(t, sixProps(urnCreated, trace, res.IDs[0], "python", 0), d.Props,
		"%s drops publish_with_headers' headers on Pulsar", w.py.versions)
}

// peerWritesNaN documents a peer bug: EnvelopeCodec.encode uses json.dumps with NaN allowed,
// so a NaN in data goes on the wire as the bare word NaN, which is not JSON. The contract
// says NaN cannot be encoded (error, nothing sent); our Consumer classifies the body as
// poison and dead-letters it with the raw text. When this fails, the peer refuses NaN now.
func peerWritesNaN(w *world) {
	t := w.t
	dlqCol := brokertest.Collect(t, w.client, w.dlqTopic())
	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	res := w.peerPublish(map[string]any{"mode": "make", "urn": urnCreated, "data_json": `{"ratio":NaN}`})
	require.Len(t, res.Sent, 1)
	sent := string(res.Sent[0].Payload)
	assert.Contains(t, sent, `"data":{"ratio":NaN}`, "%s writes NaN into the body", w.py.versions)

	dl := dlqCol.Wait(t, 1, brokertest.WaitLong)[0]
	env, err := envelope.Decode(dl.Payload())
	require.NoError(t, err, "%s", dl.Payload())
	require.NotNil(t, env.DeadLetter)
	assert.Equal(t, envelope.ReasonPoison, env.DeadLetter.Reason)
	var poison struct {
		Raw string `json:"raw"`
	}
	require.NoError(t, json.Unmarshal(dl.Payload(), &poison))
	assert.Equal(t, sent, poison.Raw, "the poison copy keeps the peer's text")
	g.waitEvent(bqpulsar.EventPoison)
	g.quiet(200 * time.Millisecond)
}
