package messaging

import (
	"go.uber.org/zap"
)

// AckStrategy is a stage's acknowledgement strategy.
type AckStrategy int

// The acknowledgement strategies. The zero value means "the shape's default".
const (
	// AckNone: the runtime never settles.
	AckNone AckStrategy = iota + 1
	// AckManual: the user settles.
	AckManual
	// AckPre: the runtime acks before invoking the function.
	AckPre
	// AckPost: the runtime acks when the function succeeded (and, for
	// processors, when the output is acked) and nacks on error.
	AckPost
)

// String returns "None", "Manual", "Pre" or "Post".
func (s AckStrategy) String() string {
	switch s {
	case AckNone:
		return "None"
	case AckManual:
		return "Manual"
	case AckPre:
		return "Pre"
	case AckPost:
		return "Post"
	default:
		return "Default"
	}
}

// StageOption configures a stage registration.
type StageOption interface{ applyStage(o *stageOptions) }

// Option configures New.
type Option interface{ applyRuntime(o *runtimeOptions) }

type stageOptions struct {
	ack      AckStrategy
	conc     int
	key      func(Metadata) string
	prefetch int64
	merge    bool
	name     string
	codec    Codec
}

type runtimeOptions struct {
	connectors []Connector
	codecs     []Codec
	log        *zap.Logger
}

type stageOpt func(o *stageOptions)

func (f stageOpt) applyStage(o *stageOptions) { f(o) }

type runtimeOpt func(o *runtimeOptions)

func (f runtimeOpt) applyRuntime(o *runtimeOptions) { f(o) }

// WithAck sets the stage's acknowledgement strategy. Default: per shape;
// a strategy the shape does not allow is an
// InvalidAckStrategy problem at Start.
func WithAck(s AckStrategy) StageOption { return stageOpt(func(o *stageOptions) { o.ack = s }) }

// WithConcurrency allows up to n invocations in flight; processor outputs are
// then unordered unless WithKeyOrdering is set. Default: 1.
func WithConcurrency(n int) StageOption {
	return stageOpt(func(o *stageOptions) { o.conc = max(n, 1) })
}

// WithKeyOrdering keeps the order per key with concurrency: messages with the
// same key are never invoked concurrently. Default: none.
func WithKeyOrdering(key func(Metadata) string) StageOption {
	return stageOpt(func(o *stageOptions) { o.key = key })
}

// WithPrefetch sets the upstream window. Default: the concurrency.
func WithPrefetch(n int64) StageOption { return stageOpt(func(o *stageOptions) { o.prefetch = n }) }

// WithMerge lets the stage's input accept several upstreams (merged with
// reactive.Merge). Default: false (several upstreams are a problem).
func WithMerge() StageOption { return stageOpt(func(o *stageOptions) { o.merge = true }) }

// WithName names the stage in problems and logs. Default:
// "Process(orders-in→invoices-out) at app.go:42".
func WithName(name string) StageOption { return stageOpt(func(o *stageOptions) { o.name = name }) }

// CodecOption is both an Option and a StageOption, see WithCodec.
type CodecOption struct{ c Codec }

func (c CodecOption) applyStage(o *stageOptions)     { o.codec = c.c }
func (c CodecOption) applyRuntime(o *runtimeOptions) { o.codecs = append(o.codecs, c.c) }

// WithCodec registers c with New (selectable by the channel attribute
// "codec"), or, as a stage option, binds c to the stage's connector channel
// (it beats the attribute). Default: the built-in codecs bytes, string, json
// and those of CodecProvider connectors.
func WithCodec(c Codec) CodecOption { return CodecOption{c: c} }

// WithConnector registers a connector; a duplicate name panics in New.
func WithConnector(c Connector) Option {
	return runtimeOpt(func(o *runtimeOptions) { o.connectors = append(o.connectors, c) })
}

// WithLogger sets the logger. Default: zap.NewNop().
func WithLogger(l *zap.Logger) Option { return runtimeOpt(func(o *runtimeOptions) { o.log = l }) }
