package bqotel

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// ScopeName is the instrumentation scope of the tracer and the meter: the import path of
// this package.
const ScopeName = "github.com/babelqueue/babelqueue-go-pulsar/bqotel"

// ErrInvalidOption is wrapped by the errors of [New] and of the Register methods for a
// refused argument.
var ErrInvalidOption = errors.New("bqotel: invalid option")

// Option configures [New].
type Option func(*config) error

type config struct {
	tp         trace.TracerProvider
	mp         metric.MeterProvider
	prop       propagation.TextMapPropagator
	urnMetrics bool
	tracing    bool
	metrics    bool
	server     []attribute.KeyValue // server.address and server.port (WithServiceURL)
}

// WithTracerProvider sets the tracer provider spans are created with. Default: the global
// one (otel.GetTracerProvider), which creates no spans until an SDK is installed. A nil
// provider is refused.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) error {
		if tp == nil {
			return fmt.Errorf("%w: nil tracer provider", ErrInvalidOption)
		}
		c.tp = tp
		return nil
	}
}

// WithMeterProvider sets the meter provider the instruments are created with. Default: the
// global one (otel.GetMeterProvider). A nil provider is refused.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) error {
		if mp == nil {
			return fmt.Errorf("%w: nil meter provider", ErrInvalidOption)
		}
		c.mp = mp
		return nil
	}
}

// WithPropagator sets the propagator that injects the producer span's context into the
// message properties and extracts it on delivery. Default: W3C Trace Context and Baggage
// (traceparent, tracestate and baggage properties). The global propagator is not used by
// default: it is a no-op until an application sets one, and a trace would then silently
// stop at the broker. A nil propagator is refused.
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) error {
		if p == nil {
			return fmt.Errorf("%w: nil propagator", ErrInvalidOption)
		}
		c.prop = p
		return nil
	}
}

// WithServiceURL names the broker the consumers and publishers talk to: the client's
// service URL (apulsar.ClientOptions.URL), which the hooks are not given. Its first host
// becomes server.address and its port server.port (6650 for pulsar://, 6651 for
// pulsar+ssl://, 80 and 443 for http:// and https:// when the URL names none) on every span
// and metric point, as the messaging conventions ask when the address is available. A URL
// that names no host is refused. Default: no server attributes.
func WithServiceURL(serviceURL string) Option {
	return func(c *config) error {
		host, port, err := parseServiceURL(serviceURL)
		if err != nil {
			return fmt.Errorf("%w: service URL %q: %w", ErrInvalidOption, serviceURL, err)
		}
		c.server = []attribute.KeyValue{semconv.ServerAddress(host), semconv.ServerPort(port)}
		return nil
	}
}

// parseServiceURL returns the first host of a Pulsar service URL
// (scheme://host[:port][,host[:port]…][/path]) and its port, or the scheme's default.
func parseServiceURL(s string) (string, int, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	defaults := map[string]int{"pulsar": 6650, "pulsar+ssl": 6651, "http": 80, "https": 443}
	port, known := defaults[strings.ToLower(scheme)]
	if !ok || !known {
		return "", 0, errors.New("the scheme is not pulsar://, pulsar+ssl://, http:// or https://")
	}
	hosts, _, _ := strings.Cut(rest, "/")
	first, _, _ := strings.Cut(hosts, ",")
	var host string
	if h, p, err := net.SplitHostPort(first); err == nil {
		n, perr := strconv.ParseUint(p, 10, 16)
		if perr != nil || n == 0 {
			return "", 0, fmt.Errorf("bad port %q", p)
		}
		host, port = h, int(n)
	} else {
		host = strings.TrimSuffix(strings.TrimPrefix(first, "["), "]")
	}
	if host == "" {
		return "", 0, errors.New("no host")
	}
	return host, port, nil
}

// WithURNMetricAttribute adds the routing URN (babelqueue.urn) to the metrics' attributes.
// Off by default: the URNs are bounded by the application's handlers, but a producer that
// sends arbitrary URNs would make a time series per URN. Spans always carry the URN.
func WithURNMetricAttribute() Option {
	return func(c *config) error {
		c.urnMetrics = true
		return nil
	}
}

// WithoutTracing turns the spans off: the hooks only record metrics, and no trace context
// is injected or extracted.
func WithoutTracing() Option {
	return func(c *config) error {
		c.tracing = false
		return nil
	}
}

// WithoutMetrics turns the metrics off: the hooks only trace.
func WithoutMetrics() Option {
	return func(c *config) error {
		c.metrics = false
		return nil
	}
}

// Telemetry traces and measures consumers and publishers of package pulsar through its
// hooks. Build it once with [New] and hand its options to every consumer and publisher
// ([Telemetry.ConsumerOptions], [Telemetry.PublisherOptions]), or its [Telemetry.Hooks] to
// anything else that takes hooks (the connector). It is safe for concurrent use.
type Telemetry struct {
	cfg    config
	tracer trace.Tracer
	m      *instruments // nil without metrics

	// The span names by destination, built once: "process <topic>" and "send <topic>".
	processNames, sendNames sync.Map

	gaugeMu    sync.Mutex
	consumers  map[*gaugeEntry]struct{}
	publishers map[*gaugeEntry]struct{}
}

// New returns a Telemetry configured by opts. Errors wrap [ErrInvalidOption] for a refused
// option, or are the meter's error creating an instrument.
func New(opts ...Option) (*Telemetry, error) {
	cfg := config{tracing: true, metrics: true}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.prop == nil {
		cfg.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	}
	t := &Telemetry{
		cfg:        cfg,
		tracer:     cfg.tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version)),
		consumers:  map[*gaugeEntry]struct{}{},
		publishers: map[*gaugeEntry]struct{}{},
	}
	if cfg.metrics {
		m, err := newInstruments(cfg.mp.Meter(ScopeName, metric.WithInstrumentationVersion(Version)), t)
		if err != nil {
			return nil, err
		}
		t.m = m
	}
	return t, nil
}

// Version is the instrumentation version reported with the scope.
const Version = "0.1.0"

// Hooks returns the hooks that trace and measure a consumer, a publisher or the
// connector's endpoints: Delivery opens a consumer span per delivery and ends it with the
// settlement, Event counts the pipeline's events, records the handler durations and adds
// the span events (retry, dead letter, poison, gate rejection, …) to the delivery's span,
// and Publish opens a producer span per message, injects its context into the message
// properties and counts the send. Give them with bqpulsar.WithHooks (or
// connector.WithHooks); other hooks given beside them compose.
func (t *Telemetry) Hooks() bqpulsar.Hooks {
	return bqpulsar.Hooks{Delivery: t.delivery, Event: t.event, Publish: t.publish}
}

// ConsumerOptions returns the options that instrument a consumer: bqpulsar.WithHooks of
// [Telemetry.Hooks].
func (t *Telemetry) ConsumerOptions() []bqpulsar.ConsumerOption {
	return []bqpulsar.ConsumerOption{bqpulsar.WithHooks(t.Hooks())}
}

// PublisherOptions returns the options that instrument a publisher: bqpulsar.WithHooks of
// [Telemetry.Hooks] (producer spans, trace context injection and the published counter).
func (t *Telemetry) PublisherOptions() []bqpulsar.PublisherOption {
	return []bqpulsar.PublisherOption{bqpulsar.WithHooks(t.Hooks())}
}
