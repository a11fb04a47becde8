package messaging

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors of the package.
var (
	// ErrAlreadySettled is returned by Ack or Nack on a message already settled.
	ErrAlreadySettled = errors.New("messaging: message already acked or nacked")
	// ErrNilArgument is the panic value (wrapped) for nil registration arguments.
	ErrNilArgument = errors.New("messaging: nil argument")
	// ErrDecode is the nack reason of an inbound message the codec cannot decode.
	ErrDecode = errors.New("messaging: decode failed")
	// ErrEncode is the nack reason of an outbound message the codec cannot encode.
	ErrEncode = errors.New("messaging: encode failed")
	// ErrClosed reports a closed runtime, source, sink or stage.
	ErrClosed = errors.New("messaging: closed")
	// ErrShutdown is the nack reason of messages left unsettled at the shutdown deadline.
	ErrShutdown = errors.New("messaging: shutdown")
	// ErrSettleTimeout is the nack reason of a message unsettled for too long.
	ErrSettleTimeout = errors.New("messaging: settlement timeout")
	// ErrNilMessage reports a nil message returned by a ProcessMessage function.
	ErrNilMessage = errors.New("messaging: nil message")
	// ErrChannelFailed is wrapped by Run when a channel stopped being live.
	ErrChannelFailed = errors.New("messaging: channel failed")
	// ErrNotStarted is wrapped by Start when a channel did not start within
	// its ctx (with ErrConnectorInit when a connector channel is among them).
	ErrNotStarted = errors.New("messaging: channel not started")
	// ErrStarted is the panic value (wrapped) of a registration after Start.
	ErrStarted = errors.New("messaging: runtime already started")
	// ErrStreamCompleted is the health reason of a connector channel whose
	// stream completed outside Shutdown: it is no longer live.
	ErrStreamCompleted = errors.New("messaging: connector channel completed")
	// ErrStreamCancelled is the health reason of a channel whose stream was
	// cancelled outside Shutdown (by a Subscribe or Channel subscriber, a
	// sink or a Transform function): it is no longer live.
	ErrStreamCancelled = errors.New("messaging: channel stream cancelled")

	// ErrNilPayload is returned by an Emitter for a nil payload or message.
	ErrNilPayload = errors.New("messaging: nil payload")
	// ErrEmitterTerminated is returned by an Emitter after Complete, Fail or Shutdown.
	ErrEmitterTerminated = errors.New("messaging: emitter terminated")
	// ErrOverflow is returned (or signalled) when an Emitter's buffer is full.
	ErrOverflow = errors.New("messaging: emitter overflow")
	// ErrNoDemand is returned by an OverflowThrowException Emitter without demand.
	ErrNoDemand = errors.New("messaging: no downstream demand")
	// ErrDropped reports a value dropped by an OverflowDrop or OverflowLatest Emitter.
	ErrDropped = errors.New("messaging: value dropped")
	// ErrNacked is wrapped by the settlement result of a nacked emitted value.
	ErrNacked = errors.New("messaging: message nacked")
)

// ProblemKind classifies an assembly problem.
type ProblemKind int

// The problem kinds; each has a sentinel Err<Kind> that the Problem unwraps to.
const (
	InvalidChannelName ProblemKind = iota + 1
	NoUpstream
	NoDownstream
	MultipleUpstreams
	MultipleDownstreams
	SelfLoop
	UnknownConnector
	MissingAttribute
	InvalidAttribute
	UnknownAttribute
	ConnectorInit
	InvalidAckStrategy
	TypeMismatch
	MissingCodec
	UnresolvedEnvKey
)

// Sentinels of the problem kinds, usable with errors.Is on an *AssemblyError.
var (
	ErrInvalidChannelName  = errors.New("messaging: invalid channel name")
	ErrNoUpstream          = errors.New("messaging: no upstream")
	ErrNoDownstream        = errors.New("messaging: no downstream")
	ErrMultipleUpstreams   = errors.New("messaging: multiple upstreams")
	ErrMultipleDownstreams = errors.New("messaging: multiple downstreams")
	ErrSelfLoop            = errors.New("messaging: stage reads its own output")
	ErrUnknownConnector    = errors.New("messaging: unknown connector")
	ErrMissingAttribute    = errors.New("messaging: missing attribute")
	ErrInvalidAttribute    = errors.New("messaging: invalid attribute")
	ErrUnknownAttribute    = errors.New("messaging: unknown attribute")
	ErrConnectorInit       = errors.New("messaging: connector initialisation failed")
	ErrInvalidAckStrategy  = errors.New("messaging: invalid ack strategy")
	ErrTypeMismatch        = errors.New("messaging: type mismatch")
	ErrMissingCodec        = errors.New("messaging: missing codec")
	ErrUnresolvedEnvKey    = errors.New("messaging: unresolved environment variable")
)

var kindInfo = map[ProblemKind]struct {
	name string
	err  error
}{
	InvalidChannelName:  {"InvalidChannelName", ErrInvalidChannelName},
	NoUpstream:          {"NoUpstream", ErrNoUpstream},
	NoDownstream:        {"NoDownstream", ErrNoDownstream},
	MultipleUpstreams:   {"MultipleUpstreams", ErrMultipleUpstreams},
	MultipleDownstreams: {"MultipleDownstreams", ErrMultipleDownstreams},
	SelfLoop:            {"SelfLoop", ErrSelfLoop},
	UnknownConnector:    {"UnknownConnector", ErrUnknownConnector},
	MissingAttribute:    {"MissingAttribute", ErrMissingAttribute},
	InvalidAttribute:    {"InvalidAttribute", ErrInvalidAttribute},
	UnknownAttribute:    {"UnknownAttribute", ErrUnknownAttribute},
	ConnectorInit:       {"ConnectorInit", ErrConnectorInit},
	InvalidAckStrategy:  {"InvalidAckStrategy", ErrInvalidAckStrategy},
	TypeMismatch:        {"TypeMismatch", ErrTypeMismatch},
	MissingCodec:        {"MissingCodec", ErrMissingCodec},
	UnresolvedEnvKey:    {"UnresolvedEnvKey", ErrUnresolvedEnvKey},
}

// String returns the kind's name, e.g. "NoUpstream".
func (k ProblemKind) String() string {
	if i, ok := kindInfo[k]; ok {
		return i.name
	}
	return fmt.Sprintf("ProblemKind(%d)", int(k))
}

// Sentinel returns the kind's sentinel error, or nil for an unknown kind.
func (k ProblemKind) Sentinel() error { return kindInfo[k].err }

// Problem is one assembly problem: its kind, where it was found and its cause.
type Problem struct { //nolint:errname // Problem is the documented name of an assembly problem
	Kind      ProblemKind
	Channel   string
	Stage     string // registration site, e.g. "Process(a→b) at app.go:42"
	Connector string
	Attribute string
	Err       error // the cause; may be nil
}

// Error describes the problem on one line.
func (p *Problem) Error() string {
	var b strings.Builder
	b.WriteString(p.Kind.String())
	if p.Channel != "" {
		fmt.Fprintf(&b, " channel %q", p.Channel)
	}
	if p.Connector != "" {
		fmt.Fprintf(&b, " connector %q", p.Connector)
	}
	if p.Attribute != "" {
		fmt.Fprintf(&b, " attribute %q", p.Attribute)
	}
	if p.Stage != "" {
		fmt.Fprintf(&b, " stage %s", p.Stage)
	}
	if p.Err != nil {
		fmt.Fprintf(&b, ": %v", p.Err)
	}
	return b.String()
}

// Unwrap returns the kind's sentinel and the cause.
func (p *Problem) Unwrap() []error {
	out := make([]error, 0, 2)
	if s := p.Kind.Sentinel(); s != nil {
		out = append(out, s)
	}
	if p.Err != nil {
		out = append(out, p.Err)
	}
	return out
}

// AssemblyError reports every problem found at Start together.
// Warnings are problems that did not prevent the start; they are only part of
// the error when it is returned for other problems.
type AssemblyError struct {
	Problems []*Problem
	Warnings []*Problem
}

// Error lists the problems, one per line.
func (e *AssemblyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "messaging: assembly failed with %d problem(s)", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Unwrap returns the problems, so errors.Is(err, ErrNoUpstream) and
// errors.As(err, **Problem) work.
func (e *AssemblyError) Unwrap() []error {
	out := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		out[i] = p
	}
	return out
}

// Has reports whether a problem of kind k was found.
func (e *AssemblyError) Has(k ProblemKind) bool {
	for _, p := range e.Problems {
		if p.Kind == k {
			return true
		}
	}
	return false
}
