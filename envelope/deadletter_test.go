package envelope_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

var failedAt = time.UnixMilli(1749132730000)

func TestToDeadLetter(t *testing.T) {
	t.Parallel()
	in := readTestdata(t, "unknown-and-forbidden.json")
	e, err := envelope.Classify(in)
	require.NoError(t, err)
	cause := fmt.Errorf("charge: %w", errors.New("payment gateway timeout"))
	dl := e.ToDeadLetter(envelope.DeadLetterInfo{
		Reason: envelope.ReasonFailed, Cause: cause, Queue: "ignored-meta-queue-wins", Attempts: 3, FailedAt: failedAt,
	})
	require.NotNil(t, dl.DeadLetter)
	assert.Nil(t, e.DeadLetter, "the original is unchanged")
	assert.Equal(t, 1, e.Attempts)

	out, err := dl.Encode()
	require.NoError(t, err)
	assertCanonical(t, `{"job":"urn:babel:orders:created","trace_id":"7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b","data":{"order_id":1042},`+
		`"meta":{"id":"f1e2d3c4-b5a6-4789-90ab-cdef01234567","queue":"orders","lang":"cobol","schema_version":1,`+
		`"created_at":1749132727000,"region":"eu-west-1","priority":1.0},"attempts":3,`+
		`"dead_letter":{"reason":"failed","error":"charge: payment gateway timeout","exception":"*fmt.wrapError",`+
		`"failed_at":1749132730000,"original_queue":"orders","attempts":3,"lang":"go"},`+
		`"x-tenant":{"id":42,"tags":["a","b"]},"z-last":null}`, out)

	back, err := envelope.Classify(out)
	require.NoError(t, err, "a dead-letter copy stays an acceptable envelope")
	assert.Equal(t, dl.DeadLetter, back.DeadLetter)

	redriven, err := back.WithoutDeadLetter().WithAttempts(e.Attempts).Encode()
	require.NoError(t, err)
	orig, err := e.Encode()
	require.NoError(t, err)
	assert.Equal(t, string(orig), string(redriven), "redrive restores the original frame")
}

func TestToDeadLetterDefaults(t *testing.T) {
	t.Parallel()
	e, err := envelope.Make("urn:a:b", nil)
	require.NoError(t, err)
	before := time.Now().UnixMilli()
	dl := e.ToDeadLetter(envelope.DeadLetterInfo{Queue: "consumed", Attempts: -2})
	require.NotNil(t, dl.DeadLetter)
	assert.Equal(t, envelope.ReasonFailed, dl.DeadLetter.Reason)
	assert.Nil(t, dl.DeadLetter.Error)
	assert.Nil(t, dl.DeadLetter.Exception)
	assert.Equal(t, "consumed", dl.DeadLetter.OriginalQueue, "meta.queue is empty")
	assert.Equal(t, 0, dl.DeadLetter.Attempts)
	assert.Equal(t, 0, dl.Attempts)
	assert.Equal(t, "go", dl.DeadLetter.Lang)
	assert.GreaterOrEqual(t, dl.DeadLetter.FailedAt, before)

	out, err := dl.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"dead_letter":{"reason":"failed","error":null,"exception":null,`)
}

func TestToDeadLetterReplacesBlock(t *testing.T) {
	t.Parallel()
	e, err := envelope.Decode(body(`,"dead_letter":{"reason":"failed","x":1}`))
	require.NoError(t, err)
	dl := e.ToDeadLetter(envelope.DeadLetterInfo{Reason: envelope.ReasonUnknownURN, Queue: "q", Attempts: 1, FailedAt: failedAt})
	out, err := dl.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"dead_letter":{"reason":"unknown_urn","error":null,"exception":null,"failed_at":1749132730000,"original_queue":"q","attempts":1,"lang":"go"}`)
}

type poisonCopy struct {
	Raw        string          `json:"raw"`
	RawBase64  *string         `json:"raw_base64"`
	DeadLetter json.RawMessage `json:"dead_letter"`
}

func TestPoisonCopy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload []byte
		raw     string
		base64  bool
	}{
		{"malformed JSON", []byte(`{"job":`), `{"job":`, false},
		{"empty", nil, "", false},
		{"control characters and separators", []byte("a\x00\n\u2028<"), "a\x00\n\u2028<", false},
		{"invalid UTF-8", []byte("{\"job\":\"\xff\xc3\"}"), "{\"job\":\"\uFFFD\uFFFD\"}", true},
		{"binary", []byte{0x00, 0xff, 0xfe, 0x80}, "\x00\uFFFD\uFFFD\uFFFD", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := envelope.PoisonCopy(tt.payload, envelope.DeadLetterInfo{
				Cause: errors.New("bad body"), Queue: "orders", Attempts: 1, FailedAt: failedAt,
			})
			require.NoError(t, err)
			require.True(t, json.Valid(out), string(out))

			var pc poisonCopy
			require.NoError(t, json.Unmarshal(out, &pc))
			assert.Equal(t, tt.raw, pc.Raw)
			if tt.base64 {
				require.NotNil(t, pc.RawBase64)
				exact, err := base64.StdEncoding.DecodeString(*pc.RawBase64)
				require.NoError(t, err)
				assert.Equal(t, tt.payload, exact, "nothing is lost")
			} else {
				assert.Nil(t, pc.RawBase64)
				assert.NotContains(t, string(out), "raw_base64")
			}
			assert.JSONEq(t, `{"reason":"poison","error":"bad body","exception":"*errors.errorString",`+
				`"failed_at":1749132730000,"original_queue":"orders","attempts":1,"lang":"go"}`, string(pc.DeadLetter))
			assert.Contains(t, string(out), `,"dead_letter":{"reason":"poison","error":"bad body",`, "canonical order")
		})
	}
}

func TestPoisonCopyShape(t *testing.T) {
	t.Parallel()
	out, err := envelope.PoisonCopy([]byte("x\xff"), envelope.DeadLetterInfo{Reason: envelope.ReasonPoison, Queue: "q", FailedAt: failedAt})
	require.NoError(t, err)
	assertCanonical(t, `{"raw":"x\ufffd","raw_base64":"eP8=","dead_letter":{"reason":"poison","error":null,"exception":null,`+
		`"failed_at":1749132730000,"original_queue":"q","attempts":0,"lang":"go"}}`, out)
}

func TestPoisonCopyRejectsOtherReasons(t *testing.T) {
	t.Parallel()
	out, err := envelope.PoisonCopy([]byte(`x`), envelope.DeadLetterInfo{Reason: envelope.ReasonFailed})
	require.ErrorIs(t, err, envelope.ErrInvalidReason)
	assert.Nil(t, out)
}
