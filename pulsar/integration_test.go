package pulsar_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

const (
	okURN      = "urn:babel:it:ok"
	failURN    = "urn:babel:it:fail"
	unknownURN = "urn:babel:it:nobody"
	waitLong   = 15 * time.Second
)

type counter struct {
	mu    sync.Mutex
	calls map[string][]int // meta.id → attempts seen by the handler
}

func newCounter() *counter { return &counter{calls: map[string][]int{}} }

func (c *counter) add(env *envelope.Envelope) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[env.Meta.ID] = append(c.calls[env.Meta.ID], env.Attempts)
}

func (c *counter) get(id string) []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.calls[id]...)
}

// TestSettlementPathsOnEverySubscriptionType runs success, handler failure exhausted,
// unknown URN exhausted, poison and gate rejection through the real client on each
// subscription type, with retries by republish (and by nack where allowed).
func TestSettlementPathsOnEverySubscriptionType(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	type variant struct {
		name     string
		subType  apulsar.SubscriptionType
		strategy retry.Strategy
	}
	variants := []variant{
		{"shared-republish", apulsar.Shared, retry.Republish},
		{"key_shared-republish", apulsar.KeyShared, retry.Republish},
		{"exclusive-republish", apulsar.Exclusive, retry.Republish},
		{"failover-republish", apulsar.Failover, retry.Republish},
		{"shared-nack", apulsar.Shared, retry.Nack},
		{"key_shared-nack", apulsar.KeyShared, retry.Nack},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			client := newClient(t, b)
			topic := uniqueTopic(t, "settle")
			dlqTopic := topic + ".dlq"
			dead := collect(t, client, dlqTopic)

			ok, failing := newCounter(), newCounter()
			var errMu sync.Mutex
			var reported []error
			c, err := bqpulsar.NewConsumer(client,
				bqpulsar.WithTopic(topic),
				bqpulsar.WithSubscription("app", v.subType),
				bqpulsar.WithConsumerOptions(earliest),
				bqpulsar.WithNackRedeliveryDelay(100*time.Millisecond),
				bqpulsar.WithRetry(retry.Policy{MaxAttempts: 2, Strategy: v.strategy}),
				bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
					ok.add(env)
					return nil
				}),
				bqpulsar.Handle(failURN, func(_ context.Context, env *envelope.Envelope, _ apulsar.Message) error {
					failing.add(env)
					return errors.New("always fails")
				}),
				onFailure(func(err error, _ *envelope.Envelope, _ apulsar.Message) {
					errMu.Lock()
					reported = append(reported, err)
					errMu.Unlock()
				}),
			)
			require.NoError(t, err)
			runConsumer(t, c)

			pub, err := bqpulsar.NewPublisher(client, topic)
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, pub.Close()) })
			okID, err := pub.Publish(t.Context(), okURN, map[string]any{"n": 1}, bqpulsar.WithKey("a"))
			require.NoError(t, err)
			failID, err := pub.Publish(t.Context(), failURN, map[string]any{"n": 2}, bqpulsar.WithKey("b"),
				bqpulsar.WithHeaders(map[string]string{"traceparent": "tp-1"}))
			require.NoError(t, err)
			unknownID, err := pub.Publish(t.Context(), unknownURN, nil, bqpulsar.WithKey("c"))
			require.NoError(t, err)

			raw, err := client.CreateProducer(apulsar.ProducerOptions{Topic: topic})
			require.NoError(t, err)
			t.Cleanup(raw.Close)
			poison := []byte(`{"job":"urn:babel:it:ok","data":[]}`)
			_, err = raw.Send(t.Context(), &apulsar.ProducerMessage{Payload: poison, Properties: map[string]string{"x-origin": "raw"}})
			require.NoError(t, err)
			gateEnv, err := envelope.Make(okURN, nil)
			require.NoError(t, err)
			gatePayload, err := gateEnv.Encode()
			require.NoError(t, err)
			gateProps := bqpulsar.ProjectProperties(gateEnv)
			gateProps[bqpulsar.PropSchemaVersion] = "2"
			_, err = raw.Send(t.Context(), &apulsar.ProducerMessage{Payload: gatePayload, Properties: gateProps})
			require.NoError(t, err)

			msgs := dead.wait(t, 4, waitLong)
			byKind := map[string]apulsar.Message{}
			for _, m := range msgs {
				env, err := envelope.Decode(m.Payload())
				switch {
				case string(m.Payload()) == string(gatePayload):
					byKind["gate"] = m
				case err == nil && env.DeadLetter != nil && env.DeadLetter.Reason != envelope.ReasonPoison:
					byKind[string(env.DeadLetter.Reason)] = m
				default:
					var p struct {
						Raw string `json:"raw"`
					}
					require.NoError(t, json.Unmarshal(m.Payload(), &p))
					byKind["raw"] = m
				}
			}
			require.Len(t, byKind, 4, "one dead letter of each kind")

			failed, err := envelope.Decode(byKind["failed"].Payload())
			require.NoError(t, err)
			assert.Equal(t, failID, failed.Meta.ID)
			assert.Equal(t, 2, failed.DeadLetter.Attempts)
			assert.Equal(t, 2, failed.Attempts)
			assert.Equal(t, "always fails", *failed.DeadLetter.Error)
			assert.Equal(t, "2", byKind["failed"].Properties()[bqpulsar.PropAttempts])
			assert.Equal(t, "tp-1", byKind["failed"].Properties()["traceparent"])
			assert.Equal(t, "b", byKind["failed"].Key())

			unknown, err := envelope.Decode(byKind["unknown_urn"].Payload())
			require.NoError(t, err)
			assert.Equal(t, unknownID, unknown.Meta.ID)
			assert.Equal(t, 2, unknown.DeadLetter.Attempts)

			var pc struct {
				Raw        string `json:"raw"`
				DeadLetter struct {
					Reason   string `json:"reason"`
					Attempts int    `json:"attempts"`
				} `json:"dead_letter"`
			}
			require.NoError(t, json.Unmarshal(byKind["raw"].Payload(), &pc))
			assert.Equal(t, string(poison), pc.Raw)
			assert.Equal(t, "poison", pc.DeadLetter.Reason)
			assert.Equal(t, 1, pc.DeadLetter.Attempts, "poison is dead-lettered at once")
			assert.Equal(t, "raw", byKind["raw"].Properties()["x-origin"])

			assert.Equal(t, gateProps, byKind["gate"].Properties(), "gate rejection: properties unchanged")

			assert.Equal(t, []int{0}, ok.get(okID), "success handled once")
			assert.Equal(t, []int{0, 1}, failing.get(failID), "failure handled maxAttempts times")
			testwait.Eventually(t, brokertest.WaitLong, func() bool { return b.Backlog(topic, "app") == 0 }, "backlog of %s not drained", topic)

			errMu.Lock()
			defer errMu.Unlock()
			var sawGate, sawPoison bool
			for _, e := range reported {
				sawGate = sawGate || errors.Is(e, bqpulsar.ErrSchemaVersion)
				sawPoison = sawPoison || errors.Is(e, envelope.ErrPoison)
			}
			assert.True(t, sawGate)
			assert.True(t, sawPoison)
		})
	}
}

func TestDelayedPublishOnShared(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "delay")
	var mu sync.Mutex
	var order []string
	var delayProp string
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("app", apulsar.Shared),
		bqpulsar.WithConsumerOptions(earliest),
		bqpulsar.Handle(okURN, func(_ context.Context, env *envelope.Envelope, msg apulsar.Message) error {
			mu.Lock()
			defer mu.Unlock()
			var d struct{ Name string }
			if err := env.Bind(&d); err != nil {
				return err
			}
			order = append(order, d.Name)
			if d.Name == "delayed" {
				delayProp = msg.Properties()[bqpulsar.PropDelay]
			}
			return nil
		}))
	require.NoError(t, err)
	runConsumer(t, c)
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	_, err = pub.Publish(t.Context(), okURN, map[string]any{"name": "delayed"}, bqpulsar.WithDelay(400*time.Millisecond))
	require.NoError(t, err)
	_, err = pub.Publish(t.Context(), okURN, map[string]any{"name": "now"})
	require.NoError(t, err)
	testwait.Eventually(t, brokertest.WaitLong, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 2
	}, "both messages handled")
	assert.Equal(t, []string{"now", "delayed"}, order, "the delayed message comes after the later undelayed one")
	assert.Equal(t, "400", delayProp)
}

func TestDelayIgnoredOnExclusive(t *testing.T) {
	t.Parallel()
	b := pulsartest.NewBroker(t)
	client := newClient(t, b)
	topic := uniqueTopic(t, "delay-excl")
	got := make(chan struct{})
	c, err := bqpulsar.NewConsumer(client,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("app", apulsar.Exclusive),
		bqpulsar.WithConsumerOptions(earliest),
		bqpulsar.Handle(okURN, func(context.Context, *envelope.Envelope, apulsar.Message) error {
			close(got)
			return nil
		}))
	require.NoError(t, err)
	runConsumer(t, c)
	pub, err := bqpulsar.NewPublisher(client, topic)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, pub.Close()) })
	_, err = pub.Publish(t.Context(), okURN, nil, bqpulsar.WithDelay(time.Hour))
	require.NoError(t, err)
	select {
	case <-got:
	case <-time.After(waitLong):
		t.Fatal("Exclusive subscriptions receive delayed messages at once")
	}
}
