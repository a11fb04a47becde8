package pulsar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// fuzzMessage answers what the engine asks of a received message.
type fuzzMessage struct {
	apulsar.Message
	payload    []byte
	props      map[string]string
	redelivery uint32
}

func (*fuzzMessage) Topic() string                   { return "persistent://public/default/orders-partition-1" }
func (m *fuzzMessage) Payload() []byte               { return m.payload }
func (m *fuzzMessage) Properties() map[string]string { return m.props }
func (m *fuzzMessage) RedeliveryCount() uint32       { return m.redelivery }
func (*fuzzMessage) Key() string                     { return "k" }
func (*fuzzMessage) OrderingKey() string             { return "" }

type fuzzSettler struct {
	mu          sync.Mutex
	acks, nacks int
	ackFails    bool
}

func (s *fuzzSettler) Ack(apulsar.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acks++
	if s.ackFails {
		return errors.New("ack lost")
	}
	return nil
}

func (s *fuzzSettler) Nack(apulsar.Message) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nacks++
}

type fuzzSender struct {
	fail     bool
	tooBig   bool
	attempts int
	sent     []*apulsar.ProducerMessage
}

func (s *fuzzSender) Send(_ context.Context, pm *apulsar.ProducerMessage) (apulsar.MessageID, error) {
	s.attempts++
	switch {
	case s.tooBig && len(pm.Payload) > 4096:
		return nil, apulsar.ErrMessageTooLarge
	case s.fail:
		return nil, errors.New("send refused")
	}
	s.sent = append(s.sent, pm)
	return apulsar.EarliestMessageID(), nil
}

// FuzzEngineFronts drives the engine the way either front does (mode's low bit: the
// Consumer's settle of a handler outcome, or one of the Delivery's settlements that the
// Source and Next use: Fail, DeadLetter, Fail with poison, Nack, Ack), with failing writes and acks and a broker that
// refuses large copies. Invariants: a delivery admitted is settled exactly once (one ack
// or one nack; a nack after a successful write cannot happen), a failed write is never
// followed by an ack, and every copy written carries a valid bq-attempts (or is the
// gate-rejected payload byte for byte).
func FuzzEngineFronts(f *testing.F) {
	env, err := envelope.Make("urn:babel:orders:created", map[string]any{"n": 1})
	if err != nil {
		f.Fatal(err)
	}
	good, err := env.Encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, "1", "0", "", uint32(0), uint8(0), uint8(0))
	f.Add(good, "", "2", "urn:x", uint32(3), uint8(1), uint8(7))
	f.Add([]byte("\xff\x00"), "2", "+1", " ", uint32(1), uint8(2), uint8(3))
	f.Add(good, "1", "9", "", uint32(0), uint8(0xff), uint8(0x1f))
	f.Fuzz(func(t *testing.T, payload []byte, schema, attempts, job string, redelivery uint32, mode, action uint8) {
		settler := &fuzzSettler{ackFails: mode&0x10 != 0}
		sender := &fuzzSender{fail: mode&4 != 0, tooBig: mode&8 != 0}
		strategy := retry.Republish
		if mode&0x20 != 0 {
			strategy = retry.Nack
		}
		e := newEngine(engineConfig{
			MaxAttempts: int(mode>>6) + 1, Policy: retry.Policy{Strategy: strategy}, BrokerDelay: true,
			SettleRejects: mode&2 == 0, Gate: true, MaxMessageSize: 64 << 10,
			Senders: func(string) (seam.Sender, func(), error) { return sender, func() {}, nil },
		}, settler)
		props := map[string]string{PropSchemaVersion: schema, PropAttempts: attempts, PropJob: job}
		msg := &fuzzMessage{payload: payload, props: props, redelivery: redelivery}
		d := e.admit(context.Background(), msg, nil, nil)
		if d != nil {
			cause := errors.New("boom")
			if mode&1 == 0 { // the Consumer: a handler's outcome
				switch action % 6 {
				case 0:
					cause = nil
				case 1:
					cause = &DeadLetterError{Err: cause}
				case 2:
					cause = &RetryAfterError{Delay: time.Millisecond, Err: cause}
				case 4:
					cause = Defer(time.Millisecond, cause)
				case 5:
					cause = AckWithWarning(cause)
				}
				e.settle(d, cause)
			} else { // the Source's settlements, through the Delivery's methods
				d.addCopyProperties(map[string]string{"x-nack": "1"})
				switch action % 5 {
				case 0:
					_ = d.Fail(cause)
				case 1:
					_ = d.DeadLetter(cause)
				case 2:
					_ = d.Fail(fmt.Errorf("%w: %w", envelope.ErrPoison, cause))
				case 3:
					_ = d.Nack(cause)
				case 4:
					_ = d.Ack()
				}
				if !errors.Is(d.Ack(), ErrSettled) {
					t.Fatal("a second settlement must return ErrSettled")
				}
			}
		}
		e.close() // runs any delayed nack at once
		settler.mu.Lock()
		acks, nacks := settler.acks, settler.nacks
		settler.mu.Unlock()
		if acks+nacks != 1 {
			t.Fatalf("settled %d times (acks %d, nacks %d), want once", acks+nacks, acks, nacks)
		}
		if sender.fail && sender.attempts > 0 && acks != 0 {
			t.Fatal("a failed write was followed by an ack")
		}
		for _, pm := range sender.sent {
			if pm.Properties[PropSchemaVersion] == schema && GateVerdict(schema, true) != nil {
				if string(pm.Payload) != string(payload) {
					t.Fatal("a gate rejection must be copied byte for byte")
				}
				continue
			}
			if _, ok := parseAttempts(pm.Properties[PropAttempts]); !ok {
				t.Fatalf("copy with bq-attempts %q", pm.Properties[PropAttempts])
			}
		}
	})
}
