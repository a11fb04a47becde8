package envelope_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// brokerLimit is the default Pulsar max message size.
const brokerLimit = 5 << 20

type truncatedCopy struct {
	Raw            string  `json:"raw"`
	RawBase64      *string `json:"raw_base64"`
	Truncated      bool    `json:"truncated"`
	RawSize        int     `json:"raw_size"`
	OriginalSize   int     `json:"original_size"`
	OriginalSHA256 string  `json:"original_sha256"`
	DeadLetter     struct {
		Reason        string  `json:"reason"`
		Error         *string `json:"error"`
		Exception     *string `json:"exception"`
		FailedAt      int64   `json:"failed_at"`
		OriginalQueue string  `json:"original_queue"`
		Attempts      int     `json:"attempts"`
		Lang          string  `json:"lang"`
	} `json:"dead_letter"`
}

// checkTruncated decodes a truncated copy of payload and checks every promise of
// TruncatedCopy: size, marker, sizes, hash, and a raw prefix that is exact.
func checkTruncated(t *testing.T, out, payload []byte, limit int) truncatedCopy {
	t.Helper()
	require.LessOrEqual(t, len(out), limit, "the copy fits the limit")
	require.True(t, json.Valid(out), "valid JSON")
	require.True(t, utf8.Valid(out), "valid UTF-8")
	var c truncatedCopy
	require.NoError(t, json.Unmarshal(out, &c))
	sum := sha256.Sum256(payload)
	assert.True(t, c.Truncated)
	assert.Equal(t, len(payload), c.OriginalSize)
	assert.Equal(t, hex.EncodeToString(sum[:]), c.OriginalSHA256)
	require.LessOrEqual(t, c.RawSize, envelope.TruncatedKeep)
	prefix := payload[:c.RawSize]
	assert.Equal(t, strings.ToValidUTF8(string(prefix), "\uFFFD") == string(prefix), c.RawBase64 == nil,
		"raw_base64 exactly when the prefix is not valid UTF-8")
	if c.RawBase64 != nil {
		exact, err := base64.StdEncoding.DecodeString(*c.RawBase64)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(prefix, exact), "raw_base64 is the exact prefix")
	}
	assert.Equal(t, []rune(string(prefix)), []rune(c.Raw), "raw is the prefix, invalid bytes as U+FFFD")
	_, err := envelope.Classify(out)
	require.ErrorIs(t, err, envelope.ErrPoison, "a truncated copy is never an acceptable envelope")
	return c
}

func TestPoisonCopyWithinLargeBodies(t *testing.T) {
	t.Parallel()
	info := envelope.DeadLetterInfo{Cause: errors.New("bad body"), Queue: "orders", Attempts: 1, FailedAt: failedAt}
	tests := []struct {
		name    string
		payload []byte
		base64  bool
	}{
		{"1 MB of NUL", make([]byte, 1<<20), false},
		{"4 MB of invalid UTF-8", bytes.Repeat([]byte{0xff, 0xc3}, 2<<20), true},
		{"5 MB of quotes", bytes.Repeat([]byte{'"'}, 5<<20), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			full, err := envelope.PoisonCopy(tt.payload, info)
			require.NoError(t, err)
			require.Greater(t, len(full), brokerLimit, "the full copy would be refused by the broker")

			out, err := envelope.PoisonCopyWithin(tt.payload, info, brokerLimit)
			require.NoError(t, err)
			c := checkTruncated(t, out, tt.payload, brokerLimit)
			assert.Equal(t, envelope.TruncatedKeep, c.RawSize, "the limit leaves room for the whole kept prefix")
			assert.Equal(t, tt.base64, c.RawBase64 != nil)
			assert.Equal(t, "poison", c.DeadLetter.Reason)
			assert.Equal(t, "bad body", *c.DeadLetter.Error)
			assert.Equal(t, "*errors.errorString", *c.DeadLetter.Exception)
			assert.Equal(t, "orders", c.DeadLetter.OriginalQueue)
			assert.Equal(t, 1, c.DeadLetter.Attempts)
			assert.Equal(t, int64(1749132730000), c.DeadLetter.FailedAt)
			assert.Equal(t, "go", c.DeadLetter.Lang)

			// A tight limit keeps a shorter prefix and still fits.
			small, err := envelope.TruncatedCopy(tt.payload, info, 4096)
			require.NoError(t, err)
			c = checkTruncated(t, small, tt.payload, 4096)
			assert.Positive(t, c.RawSize)
			assert.Greater(t, len(small), 4096-8, "the limit is used up to a unit")
		})
	}
}

func TestTruncatedCopyShape(t *testing.T) {
	t.Parallel()
	payload := []byte("ab\xffcd")
	out, err := envelope.TruncatedCopy(payload, envelope.DeadLetterInfo{Queue: "q", FailedAt: failedAt}, 1000)
	require.NoError(t, err)
	assertCanonical(t, `{"raw":"ab\ufffdcd","raw_base64":"YWL/Y2Q=","truncated":true,"raw_size":5,"original_size":5,`+
		`"original_sha256":"`+sha256Hex(payload)+`","dead_letter":{"reason":"poison","error":null,"exception":null,`+
		`"failed_at":1749132730000,"original_queue":"q","attempts":0,"lang":"go"}}`, out)
}

// TestTruncatedCopyKeepsTheReason: the block's reason is info.Reason, and poison only when
// it is zero; a consumer cuts an oversized failed or unknown-URN copy with its own reason.
func TestTruncatedCopyKeepsTheReason(t *testing.T) {
	t.Parallel()
	for reason, want := range map[envelope.Reason]string{
		"":                        "poison",
		envelope.ReasonPoison:     "poison",
		envelope.ReasonFailed:     "failed",
		envelope.ReasonUnknownURN: "unknown_urn",
	} {
		payload := []byte(`{"job":"urn:a:b"}`)
		out, err := envelope.TruncatedCopy(payload, envelope.DeadLetterInfo{Reason: reason, Queue: "q", FailedAt: failedAt}, 1000)
		require.NoError(t, err, "%q", reason)
		c := checkTruncated(t, out, payload, 1000)
		assert.Equal(t, want, c.DeadLetter.Reason, "info.Reason %q", reason)
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// TestTruncatedCopyEveryLimit walks the limit up byte by byte over bodies mixing escapes,
// multi-byte characters and invalid bytes: every copy fits and is exact (raw_base64 is
// counted as soon as an invalid byte is kept), and a large limit keeps the whole body.
func TestTruncatedCopyEveryLimit(t *testing.T) {
	t.Parallel()
	info := envelope.DeadLetterInfo{Cause: errors.New("é\u2028"), Queue: "q", FailedAt: failedAt}
	for _, payload := range [][]byte{
		[]byte("a\x00\"\\\n\u2028é€😀\xffz\xc3"),
		[]byte("😀😀😀😀"),
		bytes.Repeat([]byte{0xe2, 0x82}, 8),
		[]byte("\x80\xbf"), // continuation bytes alone, 0x80 the lowest byte above ASCII
	} {
		minimum, prev := 0, 0
		for limit := 0; limit < 600; limit++ {
			out, err := envelope.TruncatedCopy(payload, info, limit)
			if errors.Is(err, envelope.ErrLimitTooSmall) {
				require.Zero(t, minimum, "a larger limit failed after a smaller one fitted")
				assert.Nil(t, out)
				continue
			}
			require.NoError(t, err)
			if minimum == 0 {
				minimum = limit
			}
			c := checkTruncated(t, out, payload, limit)
			assert.LessOrEqual(t, c.RawSize, len(payload))
			prev = c.RawSize
		}
		assert.Equal(t, len(payload), prev, "a large limit keeps the whole body")
		require.NotZero(t, minimum)
		require.Less(t, minimum, 350, "the block and marker need a few hundred bytes")
	}
}

// TestTruncatedCopySmallestLimit: the smallest limit that TruncatedCopy accepts is what the
// block and the marker take (a one-byte body's count of kept bytes has as many digits as the
// "0" of an empty raw), so the copy at that limit fills it; one byte less fails and says
// how many the copy needs.
func TestTruncatedCopySmallestLimit(t *testing.T) {
	t.Parallel()
	info := envelope.DeadLetterInfo{Cause: errors.New("boom"), Queue: "q", FailedAt: failedAt}
	var out []byte
	var err error
	limit := 0
	for ; limit < 600; limit++ {
		if out, err = envelope.TruncatedCopy([]byte("x"), info, limit); !errors.Is(err, envelope.ErrLimitTooSmall) {
			break
		}
	}
	require.NoError(t, err)
	assert.Len(t, out, limit, "the copy fills the smallest limit")
	_, err = envelope.TruncatedCopy([]byte("x"), info, limit-1)
	require.ErrorIs(t, err, envelope.ErrLimitTooSmall)
	assert.ErrorContains(t, err, fmt.Sprintf("the block and marker need %d", limit))
}

func TestTruncatedCopyCutsALongError(t *testing.T) {
	t.Parallel()
	cause := errors.New(strings.Repeat("ü", 10_000))
	out, err := envelope.TruncatedCopy([]byte("body"), envelope.DeadLetterInfo{Cause: cause, Queue: "q"}, 2000)
	require.NoError(t, err)
	c := checkTruncated(t, out, []byte("body"), 2000)
	require.NotNil(t, c.DeadLetter.Error)
	assert.True(t, strings.HasPrefix(cause.Error(), *c.DeadLetter.Error), "the error is cut, not changed")
	assert.Greater(t, len(*c.DeadLetter.Error), 1000)
	assert.True(t, utf8.ValidString(*c.DeadLetter.Error), "cut at a character boundary")
	assert.Zero(t, c.RawSize, "the block comes before raw")

	_, err = envelope.TruncatedCopy([]byte("body"), envelope.DeadLetterInfo{Queue: strings.Repeat("q", 500)}, 300)
	require.ErrorIs(t, err, envelope.ErrLimitTooSmall)
}

func TestPoisonCopyWithinKeepsTheFullCopyWhenItFits(t *testing.T) {
	t.Parallel()
	info := envelope.DeadLetterInfo{Cause: errors.New("x"), Queue: "q", FailedAt: failedAt}
	for _, payload := range [][]byte{
		[]byte(`{"job":` + strings.Repeat("x", 500)),
		bytes.Repeat([]byte("\x00\xff\u2028\"é"), 100),
	} {
		full, err := envelope.PoisonCopy(payload, info)
		require.NoError(t, err)
		got, err := envelope.PoisonCopyWithin(payload, info, len(full))
		require.NoError(t, err)
		assert.Equal(t, string(full), string(got), "exactly at the limit: the full copy")

		got, err = envelope.PoisonCopyWithin(payload, info, len(full)-1)
		require.NoError(t, err)
		checkTruncated(t, got, payload, len(full)-1)

		_, err = envelope.PoisonCopyWithin(payload, envelope.DeadLetterInfo{Reason: envelope.ReasonFailed}, 1000)
		require.ErrorIs(t, err, envelope.ErrInvalidReason)

		fit, err := envelope.FitDeadLetter(full, payload, info, len(full))
		require.NoError(t, err)
		assert.Equal(t, string(full), string(fit))
		fit, err = envelope.FitDeadLetter(full, payload, info, len(full)-1)
		require.NoError(t, err)
		checkTruncated(t, fit, payload, len(full)-1)
	}
}

func TestDeadLetterWithin(t *testing.T) {
	t.Parallel()
	// An acceptable body just under the broker limit: its annotated copy is over it.
	big := `{"blob":"` + strings.Repeat("x", brokerLimit-200) + `"}`
	payload := []byte(`{"job":"urn:a:b","trace_id":"t","data":` + big + `,"meta":{"schema_version":1,"queue":"orders"}}`)
	require.Less(t, len(payload), brokerLimit)
	e, err := envelope.Classify(payload)
	require.NoError(t, err)
	info := envelope.DeadLetterInfo{Cause: errors.New("handler failed"), Queue: "consumed", Attempts: 3, FailedAt: failedAt}

	out, err := e.DeadLetterWithin(payload, info, brokerLimit)
	require.NoError(t, err)
	c := checkTruncated(t, out, payload, brokerLimit)
	assert.Equal(t, "failed", c.DeadLetter.Reason, "the block ToDeadLetter writes")
	assert.Equal(t, "orders", c.DeadLetter.OriginalQueue, "meta.queue wins")
	assert.Equal(t, 3, c.DeadLetter.Attempts)
	assert.Equal(t, "handler failed", *c.DeadLetter.Error)

	canonical, err := e.Encode()
	require.NoError(t, err)
	out, err = e.DeadLetterWithin(nil, info, brokerLimit)
	require.NoError(t, err)
	checkTruncated(t, out, canonical, brokerLimit)

	// A small envelope gets its full annotated copy.
	small, err := envelope.Classify(body(`,"x-tenant":7`))
	require.NoError(t, err)
	out, err = small.DeadLetterWithin(nil, info, brokerLimit)
	require.NoError(t, err)
	want, err := small.ToDeadLetter(info).Encode()
	require.NoError(t, err)
	assert.Equal(t, string(want), string(out))
	out, err = small.DeadLetterWithin(nil, info, len(want))
	require.NoError(t, err)
	assert.Equal(t, string(want), string(out), "exactly at the limit: the full copy")
}
