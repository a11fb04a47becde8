package pulsar

import (
	"context"
	"errors"
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"
)

// The Pulsar client hides a broker that is gone: Receive blocks while the consumer tries to
// reconnect in the background, for ever. So while no message arrives, the consumer asks the
// broker about its topic (a partitioned-metadata lookup, which a live broker answers at once)
// every probe interval, and counts the broker unreachable while those probes fail or go
// unanswered.

// probeInterval is the time without a message after which the consumer probes the broker,
// and between probes; with [WithUnreachableTimeout] it is at most a quarter of the timeout.
const probeInterval = 5 * time.Second

// ErrUnreachable is matched by the *[UnreachableError] that the consumer reports to the
// Event hooks (in an [EventError]) when the broker stops answering, and that [Consumer.Run] returns when it
// stayed unreachable for the [WithUnreachableTimeout].
var ErrUnreachable = errors.New("pulsar: broker unreachable")

// UnreachableError says that the broker has not answered the consumer's probes for For. Err
// is the last probe's error. It matches [ErrUnreachable] and unwraps to Err.
type UnreachableError struct {
	For time.Duration
	Err error
}

func (e *UnreachableError) Error() string {
	if e.For == 0 {
		return fmt.Sprintf("pulsar: broker unreachable: %v", e.Err)
	}
	return fmt.Sprintf("pulsar: broker unreachable for %s: %v", e.For.Round(time.Millisecond), e.Err)
}

// Unwrap returns [ErrUnreachable] and the last probe's error, so that the error matches both.
func (e *UnreachableError) Unwrap() []error { return matching(ErrUnreachable, e.Err) }

var errNoAnswer = errors.New("no answer to a lookup within the probe interval")

// topicProbe asks the broker for the partitions of a topic.
func topicProbe(client apulsar.Client) func(topic string) error {
	return func(topic string) error {
		_, err := client.TopicPartitions(topic)
		return err //nolint:wrapcheck // wrapped in an UnreachableError by the watchdog
	}
}

func (c *Consumer) probeEvery() time.Duration {
	if d := c.cfg.unreachableTimeout; d > 0 {
		return min(probeInterval, max(d/4, 50*time.Millisecond))
	}
	return probeInterval
}

// watch runs the unreachable-broker watchdog until ctx ends; the returned channel is closed
// when it has. When the broker stayed unreachable for the configured timeout, it cancels
// the receive loop with the *UnreachableError as the cause (stop; nil for Next, which goes
// on trying). After each probe the broker answered, it checks that the broker still holds
// the consumer (resubscribe.go).
func (c *Consumer) watch(ctx context.Context, stop context.CancelCauseFunc) <-chan struct{} {
	done := make(chan struct{})
	if c.probe == nil {
		close(done) // no client to ask
		return done
	}
	every := c.probeEvery()
	go func() {
		defer close(done)
		ticker := time.NewTicker(every)
		defer ticker.Stop()
		results := make(chan error, 1) // one probe at a time: its send never blocks
		checks := make(chan struct{}, 1)
		var (
			checking   bool // a strand check (and its remedy) is running
			probing    bool
			probeStart time.Time
			seen       = c.received.Load() // messages received as of the last tick
			since      time.Time           // first failure of the current episode; zero while reachable
		)
		verdict := func(err error) {
			now := time.Now()
			if err == nil {
				if !since.IsZero() {
					c.cfg.logger.Info("broker reachable again", zap.Duration("after", now.Sub(since)))
					c.eng.setReceiving(nil)
					since = time.Time{}
				}
				return
			}
			if since.IsZero() {
				since = now
				uerr := &UnreachableError{Err: err}
				c.cfg.logger.Warn("broker unreachable", zap.Error(err))
				c.eng.observe(nil, Event{Kind: EventError, Err: uerr})
			}
			uerr := &UnreachableError{For: now.Sub(since), Err: err}
			c.eng.setReceiving(uerr)
			if d := c.cfg.unreachableTimeout; stop != nil && d > 0 && uerr.For >= d {
				c.cfg.logger.Error("broker unreachable for the unreachable timeout; stopping", zap.Error(uerr),
					zap.Duration("timeout", d))
				stop(uerr)
			}
		}
		for {
			select {
			case <-ctx.Done():
				return
			case err := <-results:
				probing = false
				verdict(err)
				if err == nil && c.check != nil && !checking {
					checking = true
					c.probes.Add(1)
					go func() {
						defer c.probes.Done()
						c.strandWatch()
						checks <- struct{}{}
					}()
				}
				continue
			case <-checks:
				checking = false
				continue
			case <-ticker.C:
			}
			if probing {
				if time.Since(probeStart) >= every {
					verdict(errNoAnswer)
				}
				continue
			}
			if n := c.received.Load(); n != seen {
				seen = n // a message arrived since the last tick: the broker is there
				verdict(nil)
				continue
			}
			topic := c.probeTarget()
			if topic == "" {
				continue // a wrapped consumer that has not received anything yet
			}
			probing, probeStart = true, time.Now()
			c.probes.Add(1)
			go func() {
				defer c.probes.Done()
				results <- c.probe(topic)
			}()
		}
	}()
	return done
}

// probeTarget is the topic to ask about: the first configured one, else the topic of the
// first message received.
func (c *Consumer) probeTarget() string {
	if len(c.cfg.topics) > 0 {
		return c.cfg.topics[0]
	}
	if t := c.probeTopic.Load(); t != nil {
		return *t
	}
	return ""
}

// strandWatch checks that the broker still holds the consumer; when it does not, it reports
// the stranded consumer and applies the remedy (strandRemedy), reporting its failure too.
func (c *Consumer) strandWatch() {
	stranded := c.check()
	c.strandChecks.Add(1)
	if stranded == nil {
		return
	}
	c.cfg.logger.Warn("the broker holds no consumer for the subscription", zap.String("subscription", c.cfg.subscription),
		zap.Error(stranded))
	c.eng.observe(nil, Event{Kind: EventError, Err: stranded})
	if err := c.strandRemedy(stranded); err != nil {
		c.cfg.logger.Error("a stranded consumer was not replaced", zap.Error(err))
		c.eng.setReceiving(err)
		c.eng.observe(nil, Event{Kind: EventError, Err: err})
	}
}
