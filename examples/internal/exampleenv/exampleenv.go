// Package exampleenv connects the example programs to Pulsar: to the broker named by
// PULSAR_URL when it is set, otherwise to an embedded Pulsar-protocol broker
// (pulsartest) started for the program, so every example runs on a fresh machine.
package exampleenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// Env is a connected client and what it needs to close.
type Env struct {
	// Client is the Pulsar client; Close closes it.
	Client apulsar.Client
	// URL is the service URL the client uses.
	URL string
	// Embedded reports whether the broker is the embedded one started for this program.
	Embedded bool
	// Admin reads the admin API (for read-only dead-letter inspection): the embedded
	// broker's, else PULSAR_ADMIN_URL's (default http://127.0.0.1:8080).
	Admin  *dlq.Admin
	broker *pulsartest.Broker
}

// Connect returns a client for PULSAR_URL, or for an embedded broker when it is unset. It
// writes one line to w saying which. The client logs through logger (nop when nil).
func Connect(ctx context.Context, w io.Writer, logger *zap.Logger) (*Env, error) {
	if logger == nil {
		logger = zap.NewNop()
	}
	e := &Env{URL: os.Getenv("PULSAR_URL")}
	if e.URL == "" {
		b, err := pulsartest.Start(ctx, pulsartest.WithAdminHTTP("127.0.0.1:0"))
		if err != nil {
			return nil, fmt.Errorf("start the embedded broker: %w", err)
		}
		e.broker, e.URL, e.Embedded = b, b.URL(), true
		fmt.Fprintf(w, "broker: embedded Pulsar-protocol broker at %s (set PULSAR_URL to use your own)\n", e.URL)
	} else {
		fmt.Fprintf(w, "broker: %s (from PULSAR_URL)\n", e.URL)
	}
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:               e.URL,
		ConnectionTimeout: 10 * time.Second,
		OperationTimeout:  10 * time.Second,
		Logger:            bqpulsar.NewClientLogger(logger),
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("connect to %s: %w", e.URL, err), e.closeBroker())
	}
	e.Client = c
	adminURL := os.Getenv("PULSAR_ADMIN_URL")
	switch {
	case e.broker != nil:
		adminURL = e.broker.AdminURL()
	case adminURL == "":
		adminURL = "http://127.0.0.1:8080"
	}
	if e.Admin, err = dlq.NewAdmin(adminURL); err != nil {
		c.Close()
		return nil, errors.Join(fmt.Errorf("admin API %s: %w", adminURL, err), e.closeBroker())
	}
	return e, nil
}

// Topic returns a topic name unique to this run, so examples never see each other's
// messages on a shared broker.
func (e *Env) Topic(name string) string {
	if e.Embedded {
		return "persistent://public/default/" + name
	}
	return fmt.Sprintf("persistent://public/default/%s-%d", name, time.Now().UnixNano())
}

// Close closes the client, then the embedded broker if one was started.
func (e *Env) Close() error {
	e.Client.Close()
	return e.closeBroker()
}

func (e *Env) closeBroker() error {
	if e.broker == nil {
		return nil
	}
	if err := e.broker.Close(); err != nil {
		return fmt.Errorf("close the embedded broker: %w", err)
	}
	return nil
}

// RunUntil runs the consumers until done is closed or ctx ends, then stops them and waits
// for their Run to return. It returns the first error a consumer stopped with for another
// reason than being stopped, or ctx's error when ctx ended before done.
func RunUntil(ctx context.Context, done <-chan struct{}, consumers ...*bqpulsar.Consumer) error {
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, len(consumers))
	for _, c := range consumers {
		go func() { errc <- c.Run(runCtx) }()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	stop()
	var first error
	for range consumers {
		if err := <-errc; err != nil && !errors.Is(err, context.Canceled) && first == nil {
			first = fmt.Errorf("consume: %w", err)
		}
	}
	if first != nil {
		return first
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("stopped before the work was done: %w", err)
	}
	return nil
}
