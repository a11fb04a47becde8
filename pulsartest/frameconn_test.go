package pulsartest_test

import (
	"bufio"
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// frameConn is a raw protocol connection whose frames a goroutine reads into a channel, so
// that a test can wait for frames with a timeout and also assert that none arrive. It
// answers the broker's PINGs itself.
type frameConn struct {
	t      *testing.T
	nc     net.Conn
	wmu    sync.Mutex // serialises writes: the reader goroutine writes PONGs
	frames chan wire.Frame
	stash  []wire.Frame // frames read while waiting for another one
	reqID  uint64
}

// dialFrames connects to a pulsar:// service URL (any target); the connection closes when
// the test ends.
func dialFrames(t *testing.T, serviceURL string) *frameConn {
	t.Helper()
	nc := dialTCP(t, serviceURL)
	fc := &frameConn{t: t, nc: nc, frames: make(chan wire.Frame, 4096)}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = nc.Close()
		<-done
	})
	go func() {
		defer close(done)
		defer close(fc.frames)
		r := bufio.NewReader(nc)
		for {
			f, err := wire.ReadFrame(r, 64<<20)
			if err != nil {
				return
			}
			if f.Cmd.GetType() == wire.BaseCommand_PING {
				if fc.write(&wire.BaseCommand{Type: wire.BaseCommand_PONG.Enum(), Pong: &wire.CommandPong{}}) != nil {
					return
				}
				continue
			}
			fc.frames <- f
		}
	}()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_CONNECT.Enum(), Connect: &wire.CommandConnect{
		ClientVersion: proto.String("raw-test"), ProtocolVersion: proto.Int32(20),
	}})
	fc.await(wire.BaseCommand_CONNECTED)
	return fc
}

// drop closes the TCP connection without a word, as a crashed client's.
func (fc *frameConn) drop() { _ = fc.nc.Close() }

func (fc *frameConn) write(cmd *wire.BaseCommand) error {
	b, err := wire.EncodeCommand(cmd)
	if err != nil {
		return err
	}
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	_, err = fc.nc.Write(b)
	return err
}

// sendFrame writes an encoded frame, such as a SEND with its payload.
func (fc *frameConn) sendFrame(frame []byte) {
	fc.t.Helper()
	fc.wmu.Lock()
	defer fc.wmu.Unlock()
	_, err := fc.nc.Write(frame)
	require.NoError(fc.t, err)
}

func (fc *frameConn) send(cmd *wire.BaseCommand) {
	fc.t.Helper()
	require.NoError(fc.t, fc.write(cmd))
}

// next returns the next frame (stashed ones first), or false when none arrives within d.
func (fc *frameConn) next(d time.Duration) (wire.Frame, bool) {
	fc.t.Helper()
	if len(fc.stash) > 0 {
		f := fc.stash[0]
		fc.stash = fc.stash[1:]
		return f, true
	}
	select {
	case f, ok := <-fc.frames:
		require.True(fc.t, ok, "the broker closed the connection")
		return f, true
	case <-time.After(d):
		return wire.Frame{}, false
	}
}

// await reads until a frame of one of the types arrives, keeping the others for next.
func (fc *frameConn) await(types ...wire.BaseCommand_Type) wire.Frame {
	fc.t.Helper()
	var kept []wire.Frame
	defer func() { fc.stash = append(kept, fc.stash...) }()
	deadline := time.Now().Add(receiveTimeout)
	for {
		var f wire.Frame
		select {
		case got, ok := <-fc.frames:
			require.True(fc.t, ok, "the broker closed the connection")
			f = got
		case <-time.After(time.Until(deadline)):
			fc.t.Fatalf("timed out waiting for %v", types)
		}
		for _, typ := range types {
			if f.Cmd.GetType() == typ {
				return f
			}
		}
		kept = append(kept, f)
	}
}

// awaitClose waits until the broker closes the connection, discarding the frames it sends
// before that.
func (fc *frameConn) awaitClose() {
	fc.t.Helper()
	fc.stash = nil
	deadline := time.After(receiveTimeout)
	for {
		select {
		case _, ok := <-fc.frames:
			if !ok {
				return
			}
		case <-deadline:
			fc.t.Fatal("the broker kept the connection open")
		}
	}
}

func (fc *frameConn) nextRequestID() uint64 {
	fc.reqID++
	return fc.reqID
}

// lookup makes the broker own the topic (a real broker loads its namespace bundle on the first lookup).
func (fc *frameConn) lookup(fq string) {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_LOOKUP.Enum(), LookupTopic: &wire.CommandLookupTopic{
		Topic: proto.String(fq), RequestId: proto.Uint64(fc.nextRequestID()), Authoritative: proto.Bool(false),
	}})
	f := fc.await(wire.BaseCommand_LOOKUP_RESPONSE)
	require.Equal(fc.t, wire.CommandLookupTopicResponse_Connect, f.Cmd.GetLookupTopicResponse().GetResponse(), "%v", f.Cmd)
}

// rawSub is what a raw SUBSCRIBE asks for.
type rawSub struct {
	topic, sub, name string
	typ              wire.CommandSubscribe_SubType
	priority         int32
	earliest         bool
}

// subscribe subscribes consumer id and returns the broker's answer (SUCCESS or ERROR).
func (fc *frameConn) subscribe(id uint64, s rawSub) wire.Frame {
	fc.t.Helper()
	pos := wire.CommandSubscribe_Latest
	if s.earliest {
		pos = wire.CommandSubscribe_Earliest
	}
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &wire.CommandSubscribe{
		Topic: proto.String(s.topic), Subscription: proto.String(s.sub), SubType: s.typ.Enum(),
		ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(fc.nextRequestID()), ConsumerName: proto.String(s.name),
		PriorityLevel: proto.Int32(s.priority), Durable: proto.Bool(true), InitialPosition: pos.Enum(),
	}})
	return fc.await(wire.BaseCommand_SUCCESS, wire.BaseCommand_ERROR)
}

// mustSubscribe subscribes consumer id, failing the test on an error.
func (fc *frameConn) mustSubscribe(id uint64, s rawSub) {
	fc.t.Helper()
	f := fc.subscribe(id, s)
	require.Equal(fc.t, wire.BaseCommand_SUCCESS, f.Cmd.GetType(), "subscribe %s: %v", s.name, f.Cmd)
}

func (fc *frameConn) flow(id uint64, permits uint32) {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_FLOW.Enum(), Flow: &wire.CommandFlow{
		ConsumerId: proto.Uint64(id), MessagePermits: proto.Uint32(permits),
	}})
}

// sync waits until the broker has handled every command sent before it: it answers a PING
// after them, on the connection's one ordered command stream.
func (fc *frameConn) sync() {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_PING.Enum(), Ping: &wire.CommandPing{}})
	fc.await(wire.BaseCommand_PONG)
}

// rawMessageBody returns the body of a MESSAGE frame's payload: what follows the checksum
// and the metadata.
func rawMessageBody(t *testing.T, f wire.Frame) string {
	t.Helper()
	p := f.Payload
	require.GreaterOrEqual(t, len(p), 10, "MESSAGE payload")
	require.Equal(t, uint16(wire.MagicCrc32c), binary.BigEndian.Uint16(p), "MESSAGE payload magic")
	metaSize := int(binary.BigEndian.Uint32(p[6:]))
	require.LessOrEqual(t, 10+metaSize, len(p), "MESSAGE metadata size")
	return string(p[10+metaSize:])
}

// messagesByConsumer reads MESSAGE frames until n arrived, then until none arrives for rawQuiet,
// and returns their bodies by consumer id, in arrival order.
func (fc *frameConn) messagesByConsumer(n int) map[uint64][]string {
	fc.t.Helper()
	got := map[uint64][]string{}
	total := 0
	deadline := time.Now().Add(receiveTimeout)
	for {
		wait := rawQuiet
		if total < n {
			wait = time.Until(deadline)
		}
		f, ok := fc.next(max(wait, 0))
		if !ok {
			if total < n {
				fc.t.Fatalf("timed out with %d of %d messages: %v", total, n, got)
			}
			return got
		}
		if f.Cmd.GetType() != wire.BaseCommand_MESSAGE {
			continue
		}
		id := f.Cmd.GetMessage().GetConsumerId()
		got[id] = append(got[id], rawMessageBody(fc.t, f))
		total++
	}
}

// rawQuiet is how long messagesByConsumer waits for further messages once it has the expected ones.
const rawQuiet = 500 * time.Millisecond

// closeConsumer closes consumer id (CLOSE_CONSUMER) and waits for the broker's SUCCESS.
func (fc *frameConn) closeConsumer(id uint64) {
	fc.t.Helper()
	fc.send(&wire.BaseCommand{Type: wire.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &wire.CommandCloseConsumer{
		ConsumerId: proto.Uint64(id), RequestId: proto.Uint64(fc.nextRequestID()),
	}})
	fc.await(wire.BaseCommand_SUCCESS)
}
