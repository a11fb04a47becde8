package messaging_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
)

type order struct {
	ID string `json:"id"`
}

// Poison is never retried: a payload the codec cannot decode is nacked with
// ErrDecode and ToDeadLetter() without invoking the stage, and the stream
// goes on.
func TestCodec_DecodeFailureNacksToDeadLetter(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{
		"mp.messaging.incoming.in.connector": "in-memory",
		"mp.messaging.incoming.in.codec":     "json",
	})
	var mu sync.Mutex
	var got []order
	messaging.Consume(rt, "in", func(_ context.Context, o order) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, o)
		return nil
	})
	start(t, rt)
	src := conn.Source("in")
	src.SendString(`{"id":"1"}`)
	src.SendString(`{not json`)
	src.SendString(`{"id":"3"}`)
	require.NoError(t, src.WaitSettled(testCtx(t), 3))
	var acked []string
	var poison int
	for _, st := range src.Settlements() {
		if st.Acked {
			acked = append(acked, string(st.Payload))
			continue
		}
		poison++
		assert.Equal(t, `{not json`, string(st.Payload))
		require.ErrorIs(t, st.Reason, messaging.ErrDecode)
		assert.Contains(t, st.Reason.Error(), "channel in")
		assert.Equal(t, messaging.DeadLetter, st.Options.Disposition, "poison goes to the dead letter, never redelivered")
	}
	assert.Equal(t, 1, poison)
	assert.ElementsMatch(t, []string{`{"id":"1"}`, `{"id":"3"}`}, acked)
	mu.Lock()
	assert.Equal(t, []order{{"1"}, {"3"}}, got, "the stage never saw the poison")
	mu.Unlock()
	require.NoError(t, rt.Shutdown(testCtx(t)), "a decode failure leaves nothing in flight")
}

// unencodable fails json encoding when Bad is set.
type unencodable struct{ Bad bool }

var errMarshal = errors.New("unencodable")

func (u unencodable) MarshalJSON() ([]byte, error) {
	if u.Bad {
		return nil, errMarshal
	}
	return json.Marshal(map[string]bool{"bad": false})
}

// An outbound encode failure nacks the message with ErrEncode (and the
// codec's error); the stream goes on.
func TestCodec_EncodeFailureNacks(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{
		"mp.messaging.outgoing.out.connector": "in-memory",
		"mp.messaging.outgoing.out.codec":     "json",
	})
	em := messaging.NewEmitter[unencodable](rt, "out")
	start(t, rt)
	err := em.Send(testCtx(t), unencodable{Bad: true})
	require.ErrorIs(t, err, messaging.ErrNacked)
	require.ErrorIs(t, err, messaging.ErrEncode)
	require.ErrorIs(t, err, errMarshal)
	require.NoError(t, em.Send(testCtx(t), unencodable{}), "the stream goes on")
	assert.Equal(t, []string{`{"bad":false}`}, conn.Sink("out").Payloads())
}

type keyItem struct{ K string }

// WithKeyOrdering with concurrency: messages of one key are never invoked
// concurrently and keep their order; other keys run meanwhile.
// The built-in bytes and string codecs convert their own type only. The
// runtime passes []byte payloads by without calling BytesCodec, so only a
// direct call reaches its Decode.
func TestCodec_BuiltInCodecsConvertTheirTypeOnly(t *testing.T) {
	for _, tc := range []struct {
		codec messaging.Codec
		v     any
		other reflect.Type
	}{
		{messaging.BytesCodec{}, []byte("x"), reflect.TypeFor[string]()},
		{messaging.StringCodec{}, "x", reflect.TypeFor[[]byte]()},
	} {
		t.Run(tc.codec.Name(), func(t *testing.T) {
			b, err := tc.codec.Encode(tc.v)
			require.NoError(t, err)
			assert.Equal(t, []byte("x"), b)
			got, err := tc.codec.Decode(b, reflect.TypeOf(tc.v))
			require.NoError(t, err)
			assert.Equal(t, tc.v, got)
			_, err = tc.codec.Decode(b, tc.other)
			require.Error(t, err)
			_, err = tc.codec.Encode(1)
			require.Error(t, err)
		})
	}
}

func TestWithKeyOrdering(t *testing.T) {
	rt, conn := newRuntime(t, map[string]string{"mp.messaging.incoming.in.connector": "in-memory"})
	var mu sync.Mutex
	running := map[string]int{}
	seen := map[string][]string{}
	var overlaps []string
	bStarted := make(chan struct{})
	var bOnce sync.Once
	messaging.Consume(rt, "in", func(ctx context.Context, p []byte) error {
		k := string(p[:1])
		mu.Lock()
		running[k]++
		if running[k] > 1 {
			overlaps = append(overlaps, string(p))
		}
		seen[k] = append(seen[k], string(p))
		mu.Unlock()
		switch {
		case string(p) == "a0": // holds key a until key b ran: proves concurrency across keys
			select {
			case <-bStarted:
			case <-ctx.Done():
			case <-time.After(waitTimeout):
				t.Error("key b never ran while key a was busy")
			}
		case k == "b":
			bOnce.Do(func() { close(bStarted) })
		}
		time.Sleep(time.Millisecond) // widen the window for a same-key overlap
		mu.Lock()
		running[k]--
		mu.Unlock()
		return nil
	}, messaging.WithConcurrency(4), messaging.WithKeyOrdering(func(md messaging.Metadata) string {
		v, _ := messaging.MetadataOf[keyItem](md)
		return v.K
	}))
	start(t, rt)
	src := conn.Source("in")
	const perKey = 8
	for i := range perKey {
		for _, k := range []string{"a", "b", "c"} {
			src.Send([]byte(k+string(rune('0'+i))), keyItem{K: k})
		}
	}
	require.NoError(t, src.WaitSettled(testCtx(t), 3*perKey))
	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, overlaps, "same-key invocations overlapped")
	for _, k := range []string{"a", "b", "c"} {
		want := make([]string, perKey)
		for i := range want {
			want[i] = k + string(rune('0'+i))
		}
		assert.Equal(t, want, seen[k], "order of key %s", k)
	}
}
