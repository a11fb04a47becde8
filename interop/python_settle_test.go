package interop_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Retries, dead letters and delays across the languages.

// retryGoToPeer: a Go worker fails and republishes; a peer worker subscribed from that moment
// on picks up the retry: Go's bytes, attempts 1 in the body and in bq-attempts, and the
// original's extra properties.
func retryGoToPeer(w *world) {
	t := w.t
	topicCol := brokertest.Collect(t, w.client, w.topic)
	g := newGoWorker(t)
	g.start(w, bqpulsar.WithMaxAttempts(3), g.handle(urnCreated, func(d goDelivery) error {
		if d.Env.Attempts > 0 {
			return nil
		}
		// The peer's subscription starts here, after the message and before its retry.
		if err := w.subscribeAt("py", apulsar.SubscriptionPositionLatest); err != nil {
			return err
		}
		return errors.New("go handler failed")
	}))
	trace := uuid.NewString()
	id, err := w.publisher().Publish(t.Context(), urnCreated, json.RawMessage(richData), bqpulsar.WithTraceID(trace),
		bqpulsar.WithHeaders(map[string]string{"traceparent": traceparent}))
	require.NoError(t, err)
	g.next()
	g.waitEvent(bqpulsar.EventRetried)
	wire := topicCol.Wait(t, 2, brokertest.WaitLong)

	res := w.peerConsume(map[string]any{"max_messages": 1, "handlers": map[string]string{urnCreated: "ok"}})
	require.Len(t, res.Deliveries, 1, "the peer gets the retry only")
	require.Len(t, res.Handled, 1)
	d := res.Deliveries[0]
	assert.Equal(t, string(wire[1].Payload()), string(d.Payload))
	// The default retry policy backs off about a second: the retry is a delayed message. (Pulsar
	// 4.0 delivers a message due within its delayed-delivery tick, 1 s, at once, so the
	// delay itself is not checked here; delay/go-delays-peer-consumes does.)
	delay, err := strconv.Atoi(d.Properties["bq-delay"])
	require.NoError(t, err, "the retry carries bq-delay: %v", d.Properties)
	assert.Positive(t, delay)
	assert.Equal(t, withProps(sixProps(urnCreated, trace, id, "go", 1), "traceparent", traceparent, "bq-delay", d.Properties["bq-delay"]), d.Properties)
	env := decodePy(t, res.Handled[0].EnvelopeJSON)
	assert.Equal(t, "1", env.Attempts.String(), "the peer's handler sees the retry's attempts")
	assert.Equal(t, id, env.Meta["id"])
	assert.Equal(t, trace, env.TraceID)
	sameJSON(t, richData, res.Handled[0].DataJSON)
}

// retryPeerToGo: a peer worker fails and republishes (its runtime's retry); a Go worker
// subscribed from that moment on picks up the retry with attempts 1.
func retryPeerToGo(w *world) {
	t := w.t
	trace := uuid.NewString()
	pub := w.peerPublish(map[string]any{"mode": "app", "urn": urnCreated, "data_json": richData, "trace_id": trace})
	require.Len(t, pub.Sent, 1)
	original := string(pub.Sent[0].Payload)
	res := w.peerConsume(map[string]any{
		"subscription": "babelqueue", "max_messages": 1, "app": map[string]any{"max_attempts": 3},
		"handlers": map[string]string{urnCreated: "handover-fail"},
		"handover": map[string]string{"topic": w.topic, "subscription": "go"},
	})
	require.Len(t, res.Handled, 1)
	require.True(t, res.Handled[0].Raised)
	require.Len(t, res.Sent, 1, "the peer republished one retry")
	retried := res.Sent[0]
	assert.Equal(t, w.topic, retried.Topic)
	assert.Equal(t, sixProps(urnCreated, trace, pub.IDs[0], "python", 1), retried.Properties)
	assert.Equal(t, strings.Replace(original, `"attempts":0}`, `"attempts":1}`, 1), string(retried.Payload),
		"the peer's retry of its own body changes attempts only")

	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	d := g.next()
	assert.Equal(t, string(retried.Payload), string(d.Payload))
	assert.Equal(t, 1, d.Env.Attempts)
	assert.Equal(t, pub.IDs[0], d.Env.Meta.ID)
	assert.Equal(t, "python", d.Env.Meta.Lang)
	sameJSON(t, richData, string(d.Env.Data))
	g.quiet(300 * time.Millisecond)
}

// retryPeerReencodes documents how the peer re-emits a body: its retry is json.dumps of what
// json.loads made of it. Unknown keys (top level and in meta) and exact integers are kept, but
// number spellings change (1.5e-7 → 1.5e-07, 1E+21 → 1e+21, 0.10 → 0.1) and U+2028 is written
// unescaped; the values are kept, and our Consumer accepts the retry. Its properties are
// projected from the body again, so an extra property (traceparent) is gone. (Our re-emits keep
// data's text and the original properties: CONTRACT.md §1.2, §2.7.)
func retryPeerReencodes(w *world) {
	t := w.t
	const data = `{"tiny":1.5e-7,"one":1.0,"exp":1E+21,"frac":0.10,"sep":"\u2028","big":9007199254740993}`
	body := `{"job":"urn:babel:orders:created","trace_id":"1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f","data":` + data + `,` +
		`"meta":{"id":"2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f6a","queue":"` + w.queue + `","lang":"go","schema_version":1,` +
		`"created_at":1767225600000,"tenant":"acme"},"attempts":0,"x_custom":[1,{"k":"v"}]}`
	env, err := envelope.Classify([]byte(body))
	require.NoError(t, err)
	_, err = w.publisher().PublishEnvelope(t.Context(), env, bqpulsar.WithHeaders(map[string]string{"traceparent": traceparent}))
	require.NoError(t, err)
	res := w.peerConsume(map[string]any{
		"subscription": "babelqueue", "max_messages": 1, "app": map[string]any{"max_attempts": 3},
		"handlers": map[string]string{urnCreated: "handover-fail"},
		"handover": map[string]string{"topic": w.topic, "subscription": "go"},
	})
	require.Len(t, res.Deliveries, 1)
	assert.Equal(t, body, string(res.Deliveries[0].Payload), "PublishEnvelope sends the received text")
	require.Len(t, res.Sent, 1, "the peer retried it")
	rewritten := string(res.Sent[0].Payload)
	assert.Equal(t, `{"job":"urn:babel:orders:created","trace_id":"1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f",`+
		`"data":{"tiny":1.5e-07,"one":1.0,"exp":1e+21,"frac":0.1,"sep":"`+"\u2028"+`","big":9007199254740993},`+
		`"meta":{"id":"2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f6a","queue":"`+w.queue+`","lang":"go","schema_version":1,`+
		`"created_at":1767225600000,"tenant":"acme"},"attempts":1,"x_custom":[1,{"k":"v"}]}`, rewritten,
		"%s re-encodes the body, unknown keys kept", w.py.versions)
	assert.Equal(t, sixProps(urnCreated, "1c2d3e4f-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "2d3e4f5a-6b7c-4d8e-9f0a-1b2c3d4e5f6a", "go", 1),
		res.Sent[0].Properties, "%s's retry carries the six properties only: traceparent is gone", w.py.versions)

	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	d := g.next()
	assert.Equal(t, rewritten, string(d.Payload))
	assert.Equal(t, 1, d.Env.Attempts)
	sameJSON(t, data, string(d.Env.Data), "the values survive the peer's retry")
}

// peerPoisonRetryLosesBody documents two differences and a peer bug. A number beyond float64
// in data (1e400) is valid JSON, and our Consumer accepts it (data is kept as text); the peer
// calls the body poison (its typed-decode rule). With dead-lettering off (its default) the
// peer retries a poison body, but republishes {"attempts":1} instead of the body, so the
// message is lost; our Consumer then dead-letters that bare body as poison. (Ours retries a
// poison body byte for byte: CONTRACT.md §2.7.) When this fails, the peer keeps the body now.
func peerPoisonRetryLosesBody(w *world) {
	t := w.t
	body := []byte(`{"job":"urn:babel:orders:created","trace_id":"5a0f8c1e-2b3d-4e5f-8a9b-0c1d2e3f4a5b","data":{"x":1e400},` +
		`"meta":{"id":"6b1f9d2e-3c4d-4e5f-9a0b-1c2d3e4f5a6b","queue":"orders","lang":"go","schema_version":1,"created_at":1767225600000},"attempts":0}`)
	_, err := envelope.Classify(body)
	require.NoError(t, err, "our classification accepts 1e400 in data")
	w.sendRaw(w.topic, body, sixProps(urnCreated, "5a0f8c1e-2b3d-4e5f-8a9b-0c1d2e3f4a5b", "6b1f9d2e-3c4d-4e5f-9a0b-1c2d3e4f5a6b", "go", 0))
	require.NoError(t, w.subscribeAt("go", apulsar.SubscriptionPositionLatest)) // after the original
	res := w.peerConsume(map[string]any{
		"subscription": "babelqueue", "max_messages": 1, "app": map[string]any{"max_attempts": 3},
		"handlers": map[string]string{urnCreated: "ok"},
	})
	assert.Empty(t, res.Handled, "%s does not hand it to the handler", w.py.versions)
	require.Len(t, res.Sent, 1, "it retries it")
	assert.Equal(t, `{"attempts":1}`, string(res.Sent[0].Payload), "%s republishes a bare {\"attempts\":1}", w.py.versions)

	dlqCol := brokertest.Collect(t, w.client, w.dlqTopic())
	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	dl := dlqCol.Wait(t, 1, brokertest.WaitLong)[0]
	var poison struct {
		Raw        string `json:"raw"`
		DeadLetter struct {
			Reason string `json:"reason"`
		} `json:"dead_letter"`
	}
	require.NoError(t, json.Unmarshal(dl.Payload(), &poison))
	assert.Equal(t, "poison", poison.DeadLetter.Reason)
	assert.Equal(t, `{"attempts":1}`, poison.Raw, "what reaches the dead-letter topic is the bare body; the original is gone")
	g.quiet(200 * time.Millisecond)
}

// retryRoutingKept: a message the peer routed by bq-job (body URN A, bq-job B) keeps bq-job B
// on Go's retry, so the peer's worker that picks the retry up routes it to B again.
func retryRoutingKept(w *world) {
	t := w.t
	g := newGoWorker(t)
	g.start(w, bqpulsar.WithRetry(retry.Policy{MaxAttempts: 3}), g.handle(urnCancelled, func(d goDelivery) error {
		if d.Env.Attempts > 0 {
			return nil
		}
		if err := w.subscribeAt("py", apulsar.SubscriptionPositionLatest); err != nil {
			return err
		}
		return errors.New("go handler failed")
	}))
	pub := w.peerPublish(map[string]any{"mode": "make", "urn": urnCreated, "data_json": `{"n":1}`, "route_urn": urnCancelled})
	require.Len(t, pub.Sent, 1)
	assert.Equal(t, urnCreated, g.next().Env.URN())
	g.waitEvent(bqpulsar.EventRetried)

	res := w.peerConsume(map[string]any{"max_messages": 1, "handlers": map[string]string{urnCreated: "ok", urnCancelled: "ok"}})
	require.Len(t, res.Deliveries, 1)
	require.Len(t, res.Handled, 1)
	assert.Equal(t, withProps(pub.Sent[0].Properties, "bq-attempts", "1"), res.Deliveries[0].Properties)
	assert.Equal(t, urnCancelled, res.Handled[0].URN, "the peer routes Go's retry on the kept bq-job")
	assert.Equal(t, urnCreated, decodePy(t, res.Handled[0].EnvelopeJSON).Job, "the body is unchanged")
}

// deadLetterGoToPeer: a Go dead-letter copy is read by the peer's redrive helper, which
// republishes it to the queue reset (no block, attempts 0); our Consumer handles it again. The
// peer acknowledges on its own subscription of the dead-letter topic, so our retention
// subscription still lists the copy.
func deadLetterGoToPeer(w *world) {
	t := w.t
	g := newGoWorker(t)
	var calls atomic.Int32
	g.start(w, bqpulsar.WithMaxAttempts(1), g.handle(urnCreated, func(goDelivery) error {
		if calls.Add(1) == 1 {
			return errors.New("go handler failed")
		}
		return nil
	}))
	trace := uuid.NewString()
	id, err := w.publisher().Publish(t.Context(), urnCreated, json.RawMessage(richData), bqpulsar.WithTraceID(trace))
	require.NoError(t, err)
	g.next()
	g.waitEvent(bqpulsar.EventDeadLettered)

	r := w.peerRedrive(map[string]any{"dlq": w.queue + ".dlq"})
	assert.Equal(t, 1, r.Redriven)
	assert.Equal(t, 0, r.Skipped)
	require.Len(t, r.Items, 1)
	assert.Equal(t, redriveItem{MessageID: id, TraceID: trace, URN: urnCreated, Reason: "failed", FromQueue: w.queue + ".dlq", To: w.queue, Redriven: true}, r.Items[0])
	require.Len(t, r.Deliveries, 1)
	assert.Equal(t, sixProps(urnCreated, trace, id, "go", 1), r.Deliveries[0].Properties, "the peer read Go's copy with its properties")
	require.Len(t, r.Sent, 1)
	back := r.Sent[0]
	assert.Equal(t, w.topic, back.Topic)
	assert.Equal(t, sixProps(urnCreated, trace, id, "go", 0), back.Properties)

	d := g.next()
	assert.Equal(t, string(back.Payload), string(d.Payload))
	assert.Equal(t, 0, d.Env.Attempts)
	assert.Nil(t, d.Env.DeadLetter)
	assert.Equal(t, id, d.Env.Meta.ID)
	sameJSON(t, richData, string(d.Env.Data))
	assert.Equal(t, int64(1), brokertest.Backlog(t, w.tg.Admin(t), w.dlqTopic(), dlq.DefaultSubscription),
		"the peer's redrive does not acknowledge on the retention subscription")
}

// deadLetterPeerToGo: the peer's dead-letter copy (its runtime, dead_letter=True) is listed
// by dlq.Peek as an annotated copy with the peer's block, moved back by dlq.Redrive, and
// handled by our Consumer with the peer's original bytes.
func deadLetterPeerToGo(w *world) {
	t := w.t
	// The retention subscription, as `bq dlq` and our consumers create it: the peer creates
	// none (see peer-copy-lost-without-retention).
	require.NoError(t, dlq.EnsureSubscription(t.Context(), w.client, w.dlqTopic(), dlq.DefaultSubscription))
	pub := w.peerPublish(map[string]any{"mode": "app", "urn": urnCreated, "data_json": richData})
	require.Len(t, pub.Sent, 1)
	res := w.peerConsume(map[string]any{
		"subscription": "babelqueue", "max_messages": 1, "app": map[string]any{"max_attempts": 1, "dead_letter": true},
		"handlers": map[string]string{urnCreated: "fail"},
	})
	require.Len(t, res.Sent, 1, "the peer wrote one dead-letter copy")
	copied := res.Sent[0]
	assert.Equal(t, w.dlqTopic(), copied.Topic)
	assert.Equal(t, withProps(pub.Sent[0].Properties, "bq-attempts", "1"), copied.Properties)

	admin, err := dlq.NewAdmin(w.tg.Admin(t), dlq.WithHTTPClient(brokertest.HTTPClient(t)))
	require.NoError(t, err)
	msgs, err := dlq.Peek(t.Context(), admin, dlq.PeekOptions{Topic: w.dlqTopic()})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	m := msgs[0]
	assert.Equal(t, dlq.KindAnnotated, m.Kind)
	assert.Equal(t, envelope.ReasonFailed, m.Reason)
	assert.Equal(t, urnCreated, m.RoutingURN)
	assert.Equal(t, string(copied.Payload), string(m.Payload))
	block := m.Envelope.DeadLetter
	require.NotNil(t, block)
	assert.Equal(t, w.queue, block.OriginalQueue)
	assert.Equal(t, 1, block.Attempts)
	assert.Equal(t, "python", block.Lang)
	require.NotNil(t, block.Error)
	assert.Equal(t, "boom from python", *block.Error)
	require.NotNil(t, block.Exception)
	assert.Equal(t, "Boom", *block.Exception)

	rep, err := dlq.Redrive(t.Context(), w.client, dlq.RedriveOptions{Topic: w.dlqTopic(), IdleTimeout: 2 * time.Second})
	require.NoError(t, err)
	require.Len(t, rep.Moved, 1)
	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	d := g.next()
	assert.Equal(t, string(pub.Sent[0].Payload), string(d.Payload), "redrive gives back the peer's original bytes")
	assert.Equal(t, pub.Sent[0].Properties, d.Props)
	assert.Equal(t, 0, d.Env.Attempts)
	assert.Nil(t, d.Env.DeadLetter)
	assert.Equal(t, "python", d.Env.Meta.Lang)
	testwait.Eventually(t, brokertest.WaitLong, func() bool {
		return brokertest.Backlog(t, w.tg.Admin(t), w.dlqTopic(), dlq.DefaultSubscription) == 0
	}, "the redriven copy is acknowledged on the retention subscription")
}

// deadLetterPeerNoRetention documents a peer limit: its runtime writes dead letters to a
// topic without making sure a durable subscription holds them. With Pulsar's default
// retention (none) the broker may delete them before anyone reads them: here a forced trim
// does. When this fails, the peer keeps its dead letters now: update the README.
func deadLetterPeerNoRetention(w *world) {
	t := w.t
	admin := w.tg.Admin(t)
	pub := w.peerPublish(map[string]any{"mode": "app", "urn": urnCreated, "data_json": `{"n":1}`})
	require.Len(t, pub.Sent, 1)
	res := w.peerConsume(map[string]any{
		"subscription": "babelqueue", "max_messages": 1, "app": map[string]any{"max_attempts": 1, "dead_letter": true},
		"handlers": map[string]string{urnCreated: "fail"},
	})
	require.Len(t, res.Sent, 1)
	require.Equal(t, w.dlqTopic(), res.Sent[0].Topic)
	assert.Empty(t, brokertest.Subscriptions(t, admin, w.dlqTopic()),
		"%s creates no subscription on its dead-letter topic", w.py.versions)

	brokertest.ForceTrim(t, admin, w.dlqTopic())
	require.NoError(t, dlq.EnsureSubscription(t.Context(), w.client, w.dlqTopic(), dlq.DefaultSubscription))
	a, err := dlq.NewAdmin(admin, dlq.WithHTTPClient(brokertest.HTTPClient(t)))
	require.NoError(t, err)
	msgs, err := dlq.Peek(t.Context(), a, dlq.PeekOptions{Topic: w.dlqTopic()})
	require.NoError(t, err)
	assert.Empty(t, msgs, "the peer's dead letter is gone after the trim")
}

// deadLetterGoPoisonToPeer documents how the peer's redrive treats a Go poison copy
// ({"raw":…}): it skips it, as it should, but "restores" it by republishing it to the
// dead-letter topic with its own projection (bq-attempts "0", the other properties gone) and
// acknowledging the one it read on its own subscription. On Pulsar every other subscription
// of the dead-letter topic (our retention subscription) then holds the copy twice.
func deadLetterGoPoisonToPeer(w *world) {
	t := w.t
	dlqCol := brokertest.Collect(t, w.client, w.dlqTopic())
	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	w.sendRaw(w.topic, []byte(`{"job":"urn:babel:orders:created","data":`), map[string]string{"x-tenant": "acme"})
	g.waitEvent(bqpulsar.EventDeadLettered)
	goCopy := dlqCol.Wait(t, 1, brokertest.WaitLong)[0]
	assert.Equal(t, map[string]string{"bq-attempts": "1", "x-tenant": "acme"}, goCopy.Properties())

	r := w.peerRedrive(map[string]any{"dlq": w.queue + ".dlq"})
	assert.Equal(t, 0, r.Redriven)
	assert.Equal(t, 1, r.Skipped, "the peer does not redrive a poison copy")
	require.Len(t, r.Sent, 1)
	assert.Equal(t, w.dlqTopic(), r.Sent[0].Topic, "%s restores a skipped copy by republishing it", w.py.versions)
	assert.Equal(t, string(goCopy.Payload()), string(r.Sent[0].Payload))
	assert.Equal(t, map[string]string{"bq-attempts": "0"}, r.Sent[0].Properties, "with the peer's projection of the copy")
	testwait.Eventually(t, brokertest.WaitLong, func() bool {
		return brokertest.Backlog(t, w.tg.Admin(t), w.dlqTopic(), dlq.DefaultSubscription) == 2
	}, "our retention subscription holds the copy twice")
}

// deadLetterPeerPoisonToGo: the peer's poison records are ADR-0035 records of its own kind:
// a JSON object without identity is spliced (its members kept, a dead_letter member added), a
// body that is not UTF-8 is carried as base64 in raw with "raw_encoding":"base64". dlq.Peek
// lists both as poison and dlq.Redrive moves neither.
func deadLetterPeerPoisonToGo(w *world) {
	t := w.t
	require.NoError(t, dlq.EnsureSubscription(t.Context(), w.client, w.dlqTopic(), dlq.DefaultSubscription))
	const noURN = `{"trace_id":"8f1c2a7e-0d3b-4c5a-9e6f-7a8b9c0d1e2f","data":{"n":1},` +
		`"meta":{"id":"0b7e3c1a-2d4f-4a6b-8c9d-0e1f2a3b4c5d","queue":"orders","lang":"php","schema_version":1,"created_at":1767225600000},"attempts":0}`
	notUTF8 := []byte(`{"job":"urn:babel:orders:created","trace_id":"t-1","data":{"s":"` + "\xff\xfe" + `"},` +
		`"meta":{"id":"m-1","queue":"orders","lang":"go","schema_version":1,"created_at":1767225600000},"attempts":0}`)
	w.peerPublish(map[string]any{"mode": "text", "text": noURN})
	w.sendRaw(w.topic, notUTF8, sixProps(urnCreated, "t-1", "m-1", "go", 0))
	res := w.peerConsume(map[string]any{
		"subscription": "babelqueue", "max_messages": 2, "app": map[string]any{"dead_letter": true},
		"handlers": map[string]string{urnCreated: "ok"},
	})
	assert.Empty(t, res.Handled)
	require.Len(t, res.Sent, 2)
	spliced, wrapped := string(res.Sent[0].Payload), res.Sent[1].Payload
	assert.True(t, strings.HasPrefix(spliced, strings.TrimSuffix(noURN, "}")+`,"dead_letter":{"reason":"poison",`),
		"a JSON object is spliced: %s", spliced)
	var rec struct {
		Raw         string         `json:"raw"`
		RawEncoding string         `json:"raw_encoding"`
		RawBase64   string         `json:"raw_base64"`
		DeadLetter  map[string]any `json:"dead_letter"`
	}
	require.NoError(t, json.Unmarshal(wrapped, &rec))
	assert.Equal(t, "base64", rec.RawEncoding)
	assert.Empty(t, rec.RawBase64, "the peer does not write our raw_base64")
	raw, err := base64.StdEncoding.DecodeString(rec.Raw)
	require.NoError(t, err)
	assert.Equal(t, notUTF8, raw, "the exact bytes are in raw, as base64")

	admin, err := dlq.NewAdmin(w.tg.Admin(t), dlq.WithHTTPClient(brokertest.HTTPClient(t)))
	require.NoError(t, err)
	msgs, err := dlq.Peek(t.Context(), admin, dlq.PeekOptions{Topic: w.dlqTopic()})
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	for _, m := range msgs {
		assert.Equal(t, dlq.KindPoison, m.Kind, "%s", m.Payload)
	}
	rep, err := dlq.Redrive(t.Context(), w.client, dlq.RedriveOptions{Topic: w.dlqTopic(), IdleTimeout: 2 * time.Second})
	require.NoError(t, err)
	assert.Empty(t, rep.Moved)
	assert.Len(t, rep.Poison, 2)
}

// delayGoToPeer: a message Go publishes WithDelay carries bq-delay and reaches the peer's
// worker (a Shared subscription, the peer's default) no earlier than the delay.
func delayGoToPeer(w *world) {
	t := w.t
	const delay = 4 * time.Second
	trace := uuid.NewString()
	id, err := w.publisher().Publish(t.Context(), urnCreated, map[string]any{"n": 1}, bqpulsar.WithTraceID(trace), bqpulsar.WithDelay(delay))
	require.NoError(t, err)
	res := w.peerConsume(map[string]any{"max_messages": 1, "timeout": 20, "handlers": map[string]string{urnCreated: "ok"}})
	require.Len(t, res.Deliveries, 1)
	require.Len(t, res.Handled, 1)
	d := res.Deliveries[0]
	assert.Equal(t, withProps(sixProps(urnCreated, trace, id, "go", 0), "bq-delay", "4000"), d.Properties)
	assert.GreaterOrEqual(t, d.ReceivedAtMs-d.PublishTimeMs, delay.Milliseconds()-100,
		"the peer received it %d ms after it was published", d.ReceivedAtMs-d.PublishTimeMs)
}

// peerCannotDelay is why the peer cannot publish a delayed message.
func peerCannotDelay(py *pythonPeer) string {
	return py.versions.String() + ": the Pulsar transport has no delayed publish (BabelQueue.publish takes no " +
		"delay, PulsarTransport.publish and publish_routed send without deliver_after or deliver_at), so no " +
		"delayed message and no bq-delay can come from the peer; its retry backoff is not applied on Pulsar " +
		"either (delay/peer-retry-backoff-ignored)"
}

// delayPeerBackoffIgnored documents a peer limit: retry_backoff is applied only by transports
// that redeliver natively, which the Pulsar transport does not, so a retry the peer publishes
// goes out at once, without bq-delay. When this fails, the peer delays its retries on Pulsar
// now: update the README.
func delayPeerBackoffIgnored(w *world) {
	t := w.t
	const backoff = 5 * time.Second
	w.peerPublish(map[string]any{"mode": "app", "urn": urnCreated, "data_json": `{"n":1}`})
	res := w.peerConsume(map[string]any{
		"subscription": "babelqueue", "max_messages": 1,
		"app":      map[string]any{"max_attempts": 3, "retry_backoff": backoff.Seconds()},
		"handlers": map[string]string{urnCreated: "handover-fail"},
		"handover": map[string]string{"topic": w.topic, "subscription": "go"},
	})
	require.Len(t, res.Sent, 1)
	require.Len(t, res.Deliveries, 1)
	assert.NotContains(t, res.Sent[0].Properties, "bq-delay", "%s sends the retry without bq-delay", w.py.versions)

	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil))
	d := g.next()
	assert.Equal(t, 1, d.Env.Attempts)
	assert.Less(t, d.PublishTime.UnixMilli()-res.Deliveries[0].PublishTimeMs, backoff.Milliseconds(),
		"the retry was published before the backoff had passed")
	assert.Less(t, time.Since(d.PublishTime), backoff, "and is delivered at once")
}
