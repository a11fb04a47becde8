package pulsar

// TeardownDone returns a channel closed when the teardown that [Consumer.Close] started has
// ended, which may be after Close returned (nil before Close). Tests wait for it after
// their assertions, so that the goroutine leak check sees an abandoned close end.
func (c *Consumer) TeardownDone() <-chan struct{} { return c.teardown }

// The documented defaults and bounds, for TestDocumentedDefaults: each option's doc comment
// states the value.
const (
	DefaultCloseTimeout      = defaultCloseTimeout
	DefaultConnectTimeout    = defaultConnectTimeout
	DefaultInflightPerWorker = inflightPerWorker
	DefaultMaxPending        = defaultMaxPending
	MaxAttemptsValue         = maxAttemptsValue
)

// ClassifyConnectError is classifyConnectError, for TestClassifyConnectError.
var ClassifyConnectError = classifyConnectError

// MaxAttempts returns the configured number of deliveries, for the option tests.
func (c *Consumer) MaxAttempts() int { return c.eng.maxAttempts() }

// ReportsFailure is reportsFailure, for the tests of package pulsar_test.
var ReportsFailure = reportsFailure

// ParseAttempts is parseAttempts, the strict bq-attempts parser that Reconcile applies, for
// TestParseAttempts and FuzzParseAttempts.
var ParseAttempts = parseAttempts

// StrandChecks returns how many times the watchdog asked the broker whether it still holds
// the consumer, for TestStrandedConsumer's real half (no false alarm over several checks).
func (c *Consumer) StrandChecks() int64 { return c.strandChecks.Load() }
