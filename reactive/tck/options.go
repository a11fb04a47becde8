package tck

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// Environment variables read when the matching Options field is zero; the
// names are the Java TCK's. Values are milliseconds.
const (
	EnvDefaultTimeout   = "DEFAULT_TIMEOUT_MILLIS"
	EnvNoSignalsTimeout = "DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS"
	EnvPollTimeout      = "DEFAULT_POLL_TIMEOUT_MILLIS_ENV"
	EnvGCTimeout        = "PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS"
)

// NoElements declares, as Options.MaxElements, a publisher that cannot emit
// a single element (such as reactive.Empty): 0 already means "default".
const NoElements int64 = -1

// Default values of the Options.
const (
	DefaultTimeout               = 100 * time.Millisecond
	DefaultGCTimeout             = 300 * time.Millisecond
	DefaultMaxElements           = reactive.Unbounded - 1
	DefaultBoundedDepth    int64 = 1
	DefaultProcessorBuffer       = 16
)

// Options configure a verification. A non-zero field beats the environment
// variable, which beats the default.
type Options struct {
	// DefaultTimeout bounds the wait for an expected signal.
	// Env: DEFAULT_TIMEOUT_MILLIS. Default: 100 ms.
	DefaultTimeout time.Duration
	// NoSignalsTimeout is how long "expect no signal" waits.
	// Env: DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS. Default: DefaultTimeout.
	// Lower it for fast in-process publishers to shorten the run.
	NoSignalsTimeout time.Duration
	// PollTimeout is the polling interval while waiting for an error.
	// Env: DEFAULT_POLL_TIMEOUT_MILLIS_ENV. Default: DefaultTimeout.
	PollTimeout time.Duration
	// GCTimeout is the rule 3.13 wait before forcing a garbage collection.
	// Env: PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS. Default: 300 ms.
	GCTimeout time.Duration
	// MaxElements is the largest stream the publisher can produce
	// (maxElementsFromPublisher); reactive.Unbounded declares a publisher that
	// never completes, NoElements one that emits nothing.
	// Default: reactive.Unbounded-1.
	MaxElements int64
	// BoundedRecursionDepth is the rule 3.3 bound on nested OnNext calls.
	// Default: 1.
	BoundedRecursionDepth int64
	// SkipStochastic skips stochastic_spec103_mustSignalOnMethodsSequentially.
	// Default: false.
	SkipStochastic bool
	// MaxSubscribers is the number of concurrent subscribers the publisher or
	// processor supports; 1 declares it unicast. Default: 0 = unlimited.
	MaxSubscribers int64
	// CoordinatedEmission declares a processor that emits only once all its
	// subscribers requested (IdentityProcessorVerification). Default: false.
	CoordinatedEmission bool
	// ProcessorBufferSize is the buffer size handed to
	// ProcessorFactory.Create. Default: 16.
	ProcessorBufferSize int
}

// config is the resolved Options.
type config struct {
	timeout, noSignals, poll, gc time.Duration
	maxElements                  int64
	depth                        int64
	skipStochastic               bool
	maxSubscribers               int64
	coordinated                  bool
	bufferSize                   int
	only                         map[string]bool // meta-tests: run just these subtests
}

func (c config) unicast() bool { return c.maxSubscribers == 1 }

func envMillis(name string) (time.Duration, bool, error) {
	s, ok := os.LookupEnv(name)
	if !ok || s == "" {
		return 0, false, nil
	}
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("tck: unable to parse %s env value [%s] as milliseconds: %w", name, s, err)
	}
	return time.Duration(ms) * time.Millisecond, true, nil
}

func pick(opt time.Duration, name string, fallback time.Duration) (time.Duration, error) {
	if opt != 0 {
		return opt, nil
	}
	d, ok, err := envMillis(name)
	if err != nil || !ok {
		return fallback, err
	}
	return d, nil
}

func resolve(o Options) (config, error) {
	var c config
	var err error
	if c.timeout, err = pick(o.DefaultTimeout, EnvDefaultTimeout, DefaultTimeout); err != nil {
		return c, err
	}
	if c.noSignals, err = pick(o.NoSignalsTimeout, EnvNoSignalsTimeout, c.timeout); err != nil {
		return c, err
	}
	if c.poll, err = pick(o.PollTimeout, EnvPollTimeout, c.timeout); err != nil {
		return c, err
	}
	if c.gc, err = pick(o.GCTimeout, EnvGCTimeout, DefaultGCTimeout); err != nil {
		return c, err
	}
	switch o.MaxElements {
	case 0:
		c.maxElements = DefaultMaxElements
	case NoElements:
		c.maxElements = 0
	default:
		c.maxElements = o.MaxElements
	}
	c.depth = o.BoundedRecursionDepth
	if c.depth == 0 {
		c.depth = DefaultBoundedDepth
	}
	c.bufferSize = o.ProcessorBufferSize
	if c.bufferSize == 0 {
		c.bufferSize = DefaultProcessorBuffer
	}
	c.skipStochastic, c.maxSubscribers, c.coordinated = o.SkipStochastic, o.MaxSubscribers, o.CoordinatedEmission
	return c, nil
}

func onlySet(names []string) map[string]bool {
	if len(names) == 0 {
		return nil
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}
