package interop_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// suiteDir is the canonical conformance data: ../shared/babelqueue-conformance from the
// repository root. It is read, never copied into the repository.
const suiteDir = "../../shared/babelqueue-conformance"

const urnIndexed = "urn:babel:catalog:item.indexed"

type suiteCase struct {
	Name   string `json:"name"`
	File   string `json:"file"`
	Valid  bool   `json:"valid"`
	Expect *struct {
		URN           string            `json:"urn"`
		Data          json.RawMessage   `json:"data"`
		Attempts      int               `json:"attempts"`
		Lang          string            `json:"lang"`
		SchemaVersion int               `json:"schema_version"`
		DeadLetter    map[string]string `json:"dead_letter"`
	} `json:"expect"`
	body []byte
}

type suite struct {
	Cases  []suiteCase `json:"cases"`
	Pulsar struct {
		PropertyProjection struct {
			EnvelopeFile string            `json:"envelope_file"`
			Properties   map[string]string `json:"properties"`
		} `json:"property_projection"`
	} `json:"pulsar"`
}

// loadSuite reads the canonical manifest and its fixtures, or skips the test when the data is
// not there.
func loadSuite(t *testing.T) suite {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(suiteDir, "manifest.json"))
	if err != nil {
		t.Skipf("the canonical conformance data is not at %s (the repository's ../shared/babelqueue-conformance): %v", suiteDir, err)
	}
	var s suite
	require.NoError(t, json.Unmarshal(b, &s))
	for i := range s.Cases {
		s.Cases[i].body, err = os.ReadFile(filepath.Join(suiteDir, s.Cases[i].File))
		require.NoError(t, err)
	}
	return s
}

// checkAccepted compares what a consumer made of a valid case with the manifest's expectation.
func checkAccepted(t *testing.T, c suiteCase, urn, dataJSON string, attempts int, lang string, schemaVersion int, deadLetter map[string]any) {
	t.Helper()
	e := c.Expect
	require.NotNil(t, e, c.Name)
	assert.Equal(t, e.URN, urn, c.Name)
	sameJSON(t, string(e.Data), dataJSON, c.Name)
	assert.Equal(t, e.Attempts, attempts, c.Name)
	assert.Equal(t, e.Lang, lang, c.Name)
	assert.Equal(t, e.SchemaVersion, schemaVersion, c.Name)
	for k, v := range e.DeadLetter {
		assert.Equal(t, v, deadLetter[k], "%s: dead_letter.%s", c.Name, k)
	}
	if e.DeadLetter == nil {
		assert.Nil(t, deadLetter, c.Name)
	}
}

// conformanceGoToPeer: the canonical fixtures, published by Go (a valid one through
// Publisher.PublishEnvelope, an invalid one, which the Publisher cannot build, as its bytes
// with no properties, and the unknown schema version also with bq-schema-version "2"), are
// accepted or refused by the peer's runtime as the manifest says. The one exception is the
// peer bug conformance/peer-accepts-unacceptable-bodies.
func conformanceGoToPeer(w *world) {
	t := w.t
	s := loadSuite(t)
	pub := w.publisher()
	type vector struct {
		c     suiteCase
		label string
	}
	var (
		vectors   []vector
		gatedBody []byte
	)
	for _, c := range s.Cases {
		if c.Valid {
			env, err := envelope.Classify(c.body)
			require.NoError(t, err, c.Name)
			_, err = pub.PublishEnvelope(t.Context(), env)
			require.NoError(t, err, c.Name)
			vectors = append(vectors, vector{c, c.Name})
			continue
		}
		if c.Name == "invalid-unknown-schema-version" {
			gatedBody = c.body
			w.sendRaw(w.topic, c.body, map[string]string{"bq-job": urnCreated, "bq-schema-version": "2"})
			vectors = append(vectors, vector{c, c.Name + " (bq-schema-version 2)"})
			continue
		}
		w.sendRaw(w.topic, c.body, nil)
		vectors = append(vectors, vector{c, c.Name + " (no properties)"})
	}

	res := w.peerConsume(map[string]any{
		"max_messages": len(vectors), "app": map[string]any{"dead_letter": true},
		"handlers": map[string]string{urnCreated: "ok", urnIndexed: "ok"},
	})
	require.Len(t, res.Deliveries, len(vectors))
	handled := map[int]peerHandled{}
	for _, h := range res.Handled {
		handled[h.Delivery] = h
	}
	refused := 0
	for i, v := range vectors {
		h, ok := handled[i]
		if !v.c.Valid {
			refused++
			assert.False(t, ok, "%s: the peer must refuse it, but its handler ran", v.label)
			continue
		}
		if !assert.True(t, ok, "%s: the peer must accept it", v.label) {
			continue
		}
		env := decodePy(t, h.EnvelopeJSON)
		attempts, err := env.Attempts.Int64()
		require.NoError(t, err)
		lang, _ := env.Meta["lang"].(string)
		checkAccepted(t, v.c, h.URN, h.DataJSON, int(attempts), lang, int(env.metaInt(t, "schema_version")), env.DeadLetter)
		if v.c.File == s.Pulsar.PropertyProjection.EnvelopeFile {
			assert.Equal(t, s.Pulsar.PropertyProjection.Properties, res.Deliveries[i].Properties,
				"pulsar.property_projection: the peer sees exactly the manifest's properties")
		}
	}
	var toDLQ int
	gatedKept := false
	for _, m := range res.Sent {
		if m.Topic != w.dlqTopic() {
			continue
		}
		toDLQ++
		if m.Properties[bqpulsar.PropSchemaVersion] == "2" {
			gatedKept = string(m.Payload) == string(gatedBody)
		}
	}
	assert.Equal(t, refused, toDLQ, "the peer dead-letters each refused vector")
	assert.True(t, gatedKept, "the peer moves the gate-rejected vector to its dead-letter queue byte for byte")
}

// conformancePeerToGo: the canonical fixtures, published by the peer's transport as they are
// written (pretty-printed, the peer's projection), are accepted or refused by our Consumer as
// the manifest says: the valid ones reach their handlers with the expected members, the
// missing URN is poison, the unknown schema version is rejected by the gate on the peer's
// bq-schema-version "2", both dead-lettered.
func conformancePeerToGo(w *world) {
	t := w.t
	s := loadSuite(t)
	dlqCol := brokertest.Collect(t, w.client, w.dlqTopic())
	g := newGoWorker(t)
	g.start(w, g.handle(urnCreated, nil), g.handle(urnIndexed, nil))
	msgs := make([]map[string]any, 0, len(s.Cases))
	for _, c := range s.Cases {
		msgs = append(msgs, map[string]any{"mode": "text", "text": string(c.body)})
	}
	res := w.peerPublish(msgs...)
	require.Len(t, res.Sent, len(s.Cases))

	var invalid []int
	for i, c := range s.Cases {
		if !c.Valid {
			invalid = append(invalid, i)
			continue
		}
		d := g.next()
		assert.Equal(t, string(c.body), string(d.Payload), "%s: the bytes as the peer sent them", c.Name)
		var block map[string]any
		if d.Env.DeadLetter != nil {
			block = map[string]any{"reason": string(d.Env.DeadLetter.Reason), "original_queue": d.Env.DeadLetter.OriginalQueue}
		}
		checkAccepted(t, c, d.URN, string(d.Env.Data), d.Env.Attempts, d.Env.Meta.Lang, d.Env.Meta.SchemaVersion, block)
		if c.File == s.Pulsar.PropertyProjection.EnvelopeFile {
			assert.Equal(t, s.Pulsar.PropertyProjection.Properties, d.Props,
				"pulsar.property_projection: the peer projects exactly the manifest's properties")
		}
		if c.Name == "urn-alias" {
			// A difference: the contract's bq-job is the URN; the peer's projection reads job
			// only. Our Consumer routes such a message on the body's URN.
			assert.NotContains(t, d.Props, bqpulsar.PropJob, "%s projects no bq-job for a urn alias", w.py.versions)
		}
	}
	copies := dlqCol.Wait(t, len(invalid), brokertest.WaitLong)
	for k, i := range invalid {
		c, sent, dl := s.Cases[i], res.Sent[i], copies[k]
		switch {
		case sent.Properties[bqpulsar.PropSchemaVersion] != "" && sent.Properties[bqpulsar.PropSchemaVersion] != "1":
			assert.Equal(t, string(c.body), string(dl.Payload()), "%s: gate rejection, moved byte for byte", c.Name)
			assert.Equal(t, sent.Properties, dl.Properties(), c.Name)
		default:
			env, err := envelope.Decode(dl.Payload())
			require.NoError(t, err, c.Name)
			require.NotNil(t, env.DeadLetter, c.Name)
			assert.Equal(t, envelope.ReasonPoison, env.DeadLetter.Reason, c.Name)
			var rec struct {
				Raw string `json:"raw"`
			}
			require.NoError(t, json.Unmarshal(dl.Payload(), &rec))
			assert.Equal(t, string(c.body), rec.Raw, "%s: the poison copy keeps the peer's text", c.Name)
		}
	}
	g.quiet(200 * time.Millisecond)
}

// peerAcceptsUnacceptable documents a peer bug: the peer's runtime never calls
// EnvelopeCodec.accepts, so a structurally valid body that the manifest calls invalid reaches
// its handler when no bq-schema-version property gates it: meta.schema_version 2 (the
// fixture invalid-unknown-schema-version) and a missing trace_id. Our Consumer classifies both
// as poison. When this fails, the peer refuses them now: update the README.
func peerAcceptsUnacceptable(w *world) {
	t := w.t
	const v2 = `{"job":"urn:babel:orders:created","trace_id":"7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b","data":{"order_id":1042},` +
		`"meta":{"id":"f1e2d3c4-b5a6-4789-90ab-cdef01234567","queue":"orders","lang":"php","schema_version":2,"created_at":1749132727000},"attempts":0}`
	const noTrace = `{"job":"urn:babel:orders:created","data":{"order_id":1043},` +
		`"meta":{"id":"f1e2d3c4-b5a6-4789-90ab-cdef01234568","queue":"orders","lang":"php","schema_version":1,"created_at":1749132727000},"attempts":0}`
	for _, body := range []string{v2, noTrace} {
		_, err := envelope.Classify([]byte(body))
		require.ErrorIs(t, err, envelope.ErrPoison, "our classification: %s", body)
		w.sendRaw(w.topic, []byte(body), nil)
	}
	res := w.peerConsume(map[string]any{
		"max_messages": 2, "app": map[string]any{"dead_letter": true},
		"handlers": map[string]string{urnCreated: "ok"},
	})
	require.Len(t, res.Deliveries, 2)
	assert.Len(t, res.Handled, 2, "%s hands both to the handler", w.py.versions)
	assert.Empty(t, res.Sent, "and dead-letters neither")
	if len(res.Handled) == 2 {
		assert.Contains(t, res.Handled[0].MetaJSON, `"schema_version": 2`)
		assert.NotContains(t, res.Handled[1].EnvelopeJSON, `"trace_id"`)
	}
}
