package pulsar_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// strandEvents records the consumer's EventError events that match ErrStranded.
type strandEvents struct {
	mu   sync.Mutex
	errs []error
}

func (s *strandEvents) hook() bqpulsar.ConsumerOption {
	return bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(ev bqpulsar.Event) {
		if ev.Kind == bqpulsar.EventError && errors.Is(ev.Err, bqpulsar.ErrStranded) {
			s.mu.Lock()
			s.errs = append(s.errs, ev.Err)
			s.mu.Unlock()
		}
	}})
}

func (s *strandEvents) all() []error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]error(nil), s.errs...)
}

// TestStrandedConsumer: a consumer that the broker no longer holds while its client waits
// for messages subscribes again and receives what was published meanwhile, under Run and
// under Next; a wrapped one is reported, in an EventError and in Health. Twice in 11 chaos
// runs on Apache Pulsar 4.0.7 (unloads every 400 ms under CPU load), pulsar-client-go
// v0.19.0 dropped a CLOSE_CONSUMER that came between the answer to its SUBSCRIBE and its
// registering the consumer; the broker showed 0 consumers and a growing backlog, and the
// consumer waited for ever. v0.21.0 registers the consumer before it sends the SUBSCRIBE
// (apache/pulsar-client-go#1476), which closes that window; the remedy stays for any other
// way to the same state. That race could not be forced on Apache Pulsar, so the embedded
// broker's StrandConsumers leaves the same state (the broker's answer to the probe,
// MetadataError "Consumer not found", is pinned on both brokers by pulsartest's
// TestErrorsOfRawCommands). The real half checks that the probe never takes a live consumer
// for a stranded one: an idle Exclusive consumer over several probes reports nothing and
// still receives.
func TestStrandedConsumer(t *testing.T) {
	t.Parallel()
	brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) {
		client := tg.Client(t)
		for _, style := range []string{"run", "next"} {
			t.Run(style, func(t *testing.T) {
				topic := tg.Topic(t, "stranded-"+style)
				var events strandEvents
				handled := make(chan string, 16)
				c, err := bqpulsar.NewConsumer(client, bqpulsar.WithTopic(topic),
					bqpulsar.WithSubscription("app", apulsar.Exclusive),
					bqpulsar.WithUnreachableTimeout(2*time.Second), // a probe every 500 ms
					events.hook(),
					bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
						handled <- env.TraceID
						return nil
					}))
				require.NoError(t, err)
				stop := consumeIn(t, c, style, handled)
				p, err := bqpulsar.NewPublisher(client, topic)
				require.NoError(t, err)
				t.Cleanup(func() { _ = p.Close() })
				ctx := context.Background()
				publish := func(trace string) {
					_, err := p.Publish(ctx, okURN, map[string]any{"n": 1}, bqpulsar.WithTraceID(trace))
					require.NoError(t, err)
				}
				publish("before")
				require.Equal(t, "before", waitHandled(t, handled))

				if tg.Broker == nil {
					// Idle over several probes: no strand reported, and the consumer still receives.
					time.Sleep(3 * time.Second) // idle time is what is tested: the probes run while nothing arrives
					publish("after")
					require.Equal(t, "after", waitHandled(t, handled))
					assert.Empty(t, events.all(), "a live consumer taken for a stranded one")
					assert.GreaterOrEqual(t, c.StrandChecks(), int64(2), "the idle consumer was not checked")
					stop()
					return
				}
				require.Equal(t, 1, tg.Broker.StrandConsumers(topic, "app"))
				publish("stranded")
				// The check waits for the client's operation timeout (5 s in tests), then the
				// consumer subscribes again and the message published meanwhile arrives. The
				// first may come again before it: its acknowledgement, which the client groups,
				// may not have reached the broker before the strand.
				trace := waitHandled(t, handled)
				if trace == "before" {
					trace = waitHandled(t, handled)
				}
				require.Equal(t, "stranded", trace)
				require.NotEmpty(t, events.all(), "the strand was not reported")
				require.ErrorContains(t, events.all()[0], "Consumer not found")
				assert.True(t, c.Health().Ready, "%v", c.Health())
				stop()
			})
		}
		t.Run("wrapped", func(t *testing.T) {
			if tg.Broker == nil {
				t.Skip("the real half of the strand is the live-consumer check of run and next")
			}
			topic := tg.Topic(t, "stranded-wrapped")
			pc, err := client.Subscribe(apulsar.ConsumerOptions{Topic: topic, SubscriptionName: "app", Type: apulsar.Exclusive})
			require.NoError(t, err)
			t.Cleanup(pc.Close)
			var events strandEvents
			handled := make(chan string, 16)
			c, err := bqpulsar.WrapConsumer(client, pc, bqpulsar.WithSubscription("app", apulsar.Exclusive),
				bqpulsar.WithUnreachableTimeout(2*time.Second), events.hook(),
				bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
					handled <- env.TraceID
					return nil
				}))
			require.NoError(t, err)
			stop := consumeIn(t, c, "run", handled)
			p, err := bqpulsar.NewPublisher(client, topic)
			require.NoError(t, err)
			t.Cleanup(func() { _ = p.Close() })
			_, err = p.Publish(context.Background(), okURN, map[string]any{"n": 1}, bqpulsar.WithTraceID("before"))
			require.NoError(t, err)
			require.Equal(t, "before", waitHandled(t, handled))
			require.Equal(t, 1, tg.Broker.StrandConsumers(topic, "app"))
			testwait.Eventually(t, 30*time.Second, func() bool { return !c.Health().Ready }, "the wrapped strand is not in Health")
			h := c.Health()
			assert.Contains(t, strings.Join(h.Reasons, "; "), "wrapped", "%v", h)
			require.NotEmpty(t, events.all())
			stop()
		})
	})
}

// consumeIn consumes with c in the style given (Run, or Next with every delivery acked before
// its trace id goes to handled) until the returned stop is called; stop closes c.
func consumeIn(t *testing.T, c *bqpulsar.Consumer, style string, handled chan<- string) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if style == "run" {
			_ = c.Run(context.Background())
			return
		}
		for {
			d, err := c.Next(context.Background())
			if err != nil {
				return
			}
			// Settled before the test hears of it: the test closes the consumer as soon as
			// it has what it waits for, and a delivery still unsettled then is reported by
			// Close (ErrUnsettled). It failed so once in CI, with the ack after the send.
			trace := d.Envelope().TraceID
			_ = d.Ack()
			handled <- trace
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			require.NoError(t, c.Close())
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitHandled(t *testing.T, handled <-chan string) string {
	t.Helper()
	select {
	case trace := <-handled:
		return trace
	case <-time.After(60 * time.Second):
		t.Fatal("no message handled within 60 s")
		return ""
	}
}
