// Observability traces and measures a publisher and a consumer with OpenTelemetry (package
// bqotel), serves the metrics for Prometheus on /metrics, beside pulsar-client-go's own
// metrics on the same registry, and serves liveness and readiness probes.
//
//	go run ./examples/observability
//
// Spans go to standard output through the OpenTelemetry stdout exporter, one JSON object
// per span: the checkout span of the application, the producer span of each order, the
// consumer span of each delivery (the producer span's child, across the broker, through
// the traceparent property) and the handler's own span under it. Order 2 fails on its
// first delivery, so it has two consumer spans, the first with a babelqueue.retry event;
// order 3 is refused for good and dead-lettered. The consumer's retry republish and its
// dead-letter copy get producer spans too, children of their delivery's span. The program
// then scrapes its own /metrics and prints the BabelQueue and client lines.
//
// deploy/grafana/babelqueue.json is a Grafana dashboard of these metrics; its test
// (dashboard_test.go) runs this program under a real Prometheus and checks every panel.
//
// It uses the broker at PULSAR_URL, or starts an embedded one.
package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/bqotel"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

const orderURN = "urn:babel:orders:created"

// Order is the data of urn:babel:orders:created.
type Order struct {
	ID int `json:"order_id"`
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	err := run(ctx, os.Stdout, options{})
	cancel()
	if err != nil {
		log.Fatalf("observability: %v", err)
	}
}

// options change what run does beyond the demonstration, for the dashboard's test.
type options struct {
	// serving, when set, is called with the base URL of /metrics once it is served.
	serving func(base string)
	// work, when set, keeps the program working after the first three orders: it publishes
	// an order every 100 ms, under the same rules, until work is closed.
	work <-chan struct{}
}

// outcome is what the handler decides for an order: order IDs 2, 5, 8, … fail on their
// first delivery and are retried, IDs 3, 6, 9, … are refused for good.
func outcome(o Order, attempts int) error {
	switch o.ID % 3 {
	case 2:
		if attempts == 0 {
			return errors.New("stock service busy")
		}
	case 0:
		return bqpulsar.DeadLetter(errors.New("no such delivery address"))
	}
	return nil
}

func run(ctx context.Context, out io.Writer, opt options) (err error) {
	// The program and the span exporter (called from the consumer's goroutine) both write.
	w := &syncWriter{w: out}

	// One Prometheus registry for the OpenTelemetry metrics and the client's own.
	reg := prometheus.NewRegistry()
	promExporter, err := otelprom.New(otelprom.WithRegisterer(reg), otelprom.WithoutTargetInfo(), otelprom.WithoutScopeInfo())
	if err != nil {
		return fmt.Errorf("prometheus exporter: %w", err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(promExporter))
	defer func() { err = errors.Join(err, mp.Shutdown(context.WithoutCancel(ctx))) }()

	spanOut := &lineWriter{w: w, prefix: "span: "}
	traceExporter, err := stdouttrace.New(stdouttrace.WithWriter(spanOut), stdouttrace.WithoutTimestamps())
	if err != nil {
		return fmt.Errorf("stdout trace exporter: %w", err)
	}
	// A syncer exports each span as it ends, so the output follows the program; a service
	// would use WithBatcher.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(traceExporter))
	defer func() { err = errors.Join(err, tp.Shutdown(context.WithoutCancel(ctx))) }()

	client, url, closeBroker, err := connect(ctx, w, reg)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeBroker()) }()
	defer client.Close()
	// The URN on the metrics (bounded by this program's handlers) and the broker's address.
	tel, err := bqotel.New(bqotel.WithTracerProvider(tp), bqotel.WithMeterProvider(mp),
		bqotel.WithURNMetricAttribute(), bqotel.WithServiceURL(url))
	if err != nil {
		return fmt.Errorf("bqotel: %w", err)
	}
	topic := "persistent://public/default/observability-orders"
	if os.Getenv("PULSAR_URL") != "" {
		topic = fmt.Sprintf("%s-%d", topic, time.Now().UnixNano())
	}

	// The consumer: order 2 fails on its first delivery and is retried, order 3 is
	// dead-lettered. An Event hook after bqotel's counts the settled orders, once their
	// metrics are recorded.
	const n = 3
	var settled atomic.Int32
	done := make(chan struct{})
	tracer := tp.Tracer("example/observability")
	countSettled := bqpulsar.WithHooks(bqpulsar.Hooks{Event: func(e bqpulsar.Event) {
		if (e.Kind == bqpulsar.EventAcked || e.Kind == bqpulsar.EventDeadLettered) && settled.Add(1) == n {
			close(done)
		}
	}})
	consumer, err := bqpulsar.NewConsumer(client, append(tel.ConsumerOptions(), countSettled,
		bqpulsar.WithTopic(topic),
		bqpulsar.WithSubscription("fulfilment", apulsar.Shared),
		bqpulsar.WithInitialPosition(apulsar.SubscriptionPositionEarliest),
		bqpulsar.WithRetry(retry.Policy{Strategy: retry.Republish, Backoff: retry.Backoff{Initial: 50 * time.Millisecond}}),
		bqpulsar.Handle(orderURN, func(ctx context.Context, e *envelope.Envelope, _ apulsar.Message) error {
			var o Order
			if err := e.Bind(&o); err != nil {
				return fmt.Errorf("bind order: %w", err)
			}
			// The handler's context carries the consumer span: this span is its child.
			_, span := tracer.Start(ctx, "reserve stock")
			defer span.End()
			return outcome(o, e.Attempts)
		}))...)
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	defer func() { err = errors.Join(err, consumer.Close()) }()
	unregister, err := tel.RegisterConsumer("fulfilment", consumer)
	if err != nil {
		return fmt.Errorf("register consumer: %w", err)
	}
	defer unregister()

	pub, err := bqpulsar.NewPublisher(client, topic, tel.PublisherOptions()...)
	if err != nil {
		return fmt.Errorf("create publisher: %w", err)
	}
	defer func() { err = errors.Join(err, pub.Close()) }() //nolint:contextcheck // Close takes no ctx; its close timeout bounds it
	unregisterPub, err := tel.RegisterPublisher(pub)
	if err != nil {
		return fmt.Errorf("register publisher: %w", err)
	}
	defer unregisterPub()

	// /metrics and the probes, on a loopback port of its own.
	srv, base, err := serve(ctx, reg, consumer)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, srv.Close()) }()
	if opt.serving != nil {
		opt.serving(base)
	}

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- consumer.Run(runCtx) }()

	// The application's own span; each order's producer span is its child.
	cctx, checkout := tracer.Start(ctx, "checkout")
	for i := 1; i <= n; i++ {
		if _, err := pub.Publish(cctx, orderURN, Order{ID: i}); err != nil {
			checkout.End()
			return fmt.Errorf("publish: %w", err)
		}
	}
	checkout.End()
	fmt.Fprintf(w, "published %d orders to %s\n", n, topic)

	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("settled %d of %d orders: %w", settled.Load(), n, ctx.Err())
	}
	fmt.Fprintf(w, "settled %d orders: 2 handled, 1 dead-lettered\n", n)
	if opt.work != nil {
		if err := keepWorking(ctx, pub, n, opt.work); err != nil {
			return err
		}
	}

	status, _, err := get(ctx, base+"/health/ready")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "GET /health/ready: %s\n", status)

	status, body, err := get(ctx, base+"/metrics")
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "GET /metrics: %s; the relevant lines:\n", status)
	printMetrics(w, body)

	stop()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		return fmt.Errorf("consume: %w", err)
	}
	fmt.Fprintln(w, "done")
	return nil
}

// keepWorking publishes an order every 100 ms, numbered after the first n, until stop is
// closed.
func keepWorking(ctx context.Context, pub *bqpulsar.Publisher, n int, stop <-chan struct{}) error {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for id := n + 1; ; id++ {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("working: %w", ctx.Err())
		case <-tick.C:
		}
		if _, err := pub.Publish(ctx, orderURN, Order{ID: id}); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
}

// connect returns a client for PULSAR_URL, or for an embedded broker, whose own metrics go
// to reg (ClientOptions.MetricsRegisterer), its service URL, and the function that closes
// the broker.
func connect(ctx context.Context, w io.Writer, reg prometheus.Registerer) (apulsar.Client, string, func() error, error) {
	url := os.Getenv("PULSAR_URL")
	closeBroker := func() error { return nil }
	if url == "" {
		b, err := pulsartest.Start(ctx)
		if err != nil {
			return nil, "", nil, fmt.Errorf("start the embedded broker: %w", err)
		}
		url, closeBroker = b.URL(), b.Close
		fmt.Fprintf(w, "broker: embedded Pulsar-protocol broker at %s (set PULSAR_URL to use your own)\n", url)
	} else {
		fmt.Fprintf(w, "broker: %s (from PULSAR_URL)\n", url)
	}
	c, err := apulsar.NewClient(apulsar.ClientOptions{
		URL:               url,
		ConnectionTimeout: 10 * time.Second,
		OperationTimeout:  10 * time.Second,
		Logger:            bqpulsar.NewClientLogger(zap.NewNop()),
		MetricsRegisterer: reg,
	})
	if err != nil {
		return nil, "", nil, errors.Join(fmt.Errorf("connect to %s: %w", url, err), closeBroker())
	}
	return c, url, closeBroker, nil
}

// serve serves /metrics from reg and the probes of consumer under /health/ on a loopback
// port, and returns the server and its base URL.
func serve(ctx context.Context, reg *prometheus.Registry, consumer *bqpulsar.Consumer) (*http.Server, string, error) {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/health/", bqpulsar.HealthHandler(bqpulsar.NamedHealthCheck("fulfilment", consumer)))
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return srv, "http://" + ln.Addr().String(), nil
}

func get(ctx context.Context, url string) (string, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", "", fmt.Errorf("request %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", "", fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", fmt.Errorf("read %s: %w", url, err)
	}
	return resp.Status, string(body), nil
}

// printMetrics prints the samples of BabelQueue's and the client's metrics, leaving out
// the comment lines and the histogram buckets.
func printMetrics(w io.Writer, body string) {
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		relevant := strings.HasPrefix(line, "babelqueue_") || strings.HasPrefix(line, "messaging_") ||
			strings.HasPrefix(line, "pulsar_client_messages_") || strings.HasPrefix(line, "pulsar_client_consumers_opened") ||
			strings.HasPrefix(line, "pulsar_client_producers_opened")
		if relevant && !strings.Contains(line, "_bucket{") {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.w.Write(p)
	if err != nil {
		return n, fmt.Errorf("write: %w", err)
	}
	return n, nil
}

// lineWriter prefixes each line written to w.
type lineWriter struct {
	w      io.Writer
	prefix string
}

func (l *lineWriter) Write(p []byte) (int, error) {
	for _, line := range strings.SplitAfter(string(p), "\n") {
		if line == "" {
			continue
		}
		if _, err := io.WriteString(l.w, l.prefix+line); err != nil {
			return 0, fmt.Errorf("write span: %w", err)
		}
	}
	return len(p), nil
}
