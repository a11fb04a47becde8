package messaging

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// DefaultShutdownTimeout bounds the drain of Run when
// babelqueue.messaging.shutdown-timeout is not set.
const DefaultShutdownTimeout = 30 * time.Second

type runState int

const (
	stateNew runState = iota
	stateStarting
	stateStarted
	stateFailed
	stateStopped
)

// Runtime holds the stages, emitters and connectors of an application and
// runs them. Register stages, then Start (or Run); a runtime
// is started once.
type Runtime struct {
	cfg        Config
	log        *zap.Logger
	connectors map[string]Connector
	codecs     map[string]Codec
	track      *tracker

	mu           sync.Mutex
	phase        runState
	nodes        []*node
	b            *builder // after Start
	emitterStops []func()
	states       map[string]*chanState

	shuttingDown atomic.Bool
	startedOK    atomic.Bool // Start returned nil
	everStarted  atomic.Bool // the runtime verdict Started was true once: it stays true
	shutOnce     sync.Once
	shutDone     chan struct{}
	shutErr      error
	done         chan struct{} // closed when every goroutine of the runtime ended after Shutdown
	dead         chan struct{}
	deadOnce     sync.Once
}

// New returns a runtime reading cfg. A duplicate connector name panics.
func New(cfg Config, opts ...Option) *Runtime {
	var o runtimeOptions
	for _, f := range opts {
		if f != nil {
			f.applyRuntime(&o)
		}
	}
	r := &Runtime{
		cfg: cfg, log: o.log, connectors: map[string]Connector{}, codecs: map[string]Codec{},
		track: newTracker(), states: map[string]*chanState{}, shutDone: make(chan struct{}), done: make(chan struct{}), dead: make(chan struct{}),
	}
	if r.log == nil {
		r.log = zap.NewNop()
	}
	for _, c := range []Codec{BytesCodec{}, StringCodec{}, JSONCodec{}} {
		r.codecs[c.Name()] = c
	}
	for _, c := range o.connectors {
		if c == nil {
			panic(fmt.Errorf("%w: connector", ErrNilArgument))
		}
		if _, dup := r.connectors[c.Name()]; dup {
			panic(fmt.Errorf("messaging: connector %q registered twice", c.Name()))
		}
		r.connectors[c.Name()] = c
		if p, ok := c.(CodecProvider); ok {
			for _, cd := range p.Codecs() {
				r.codecs[cd.Name()] = cd
			}
		}
	}
	for _, c := range o.codecs {
		if c == nil {
			panic(fmt.Errorf("%w: codec", ErrNilArgument))
		}
		r.codecs[c.Name()] = c
	}
	return r
}

func (r *Runtime) register(n *node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.phase != stateNew {
		panic(fmt.Errorf("%w: cannot register %s", ErrStarted, n.name))
	}
	r.nodes = append(r.nodes, n)
}

func (r *Runtime) emitterBufferSize() int {
	if v, ok := r.cfg.Get(KeyEmitterBufferSize); ok {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			return n
		}
	}
	return DefaultEmitterBufferSize
}

// state returns the observed state of channel ch (created on first use).
func (r *Runtime) state(ch string) *chanState {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.states[ch]
	if !ok {
		s = &chanState{channel: ch, onDead: r.channelDied, stopping: r.shuttingDown.Load}
		r.states[ch] = s
	}
	return s
}

func (r *Runtime) channelDied() {
	if r.shuttingDown.Load() {
		return
	}
	r.deadOnce.Do(func() { close(r.dead) })
}

// builder wires the graph at Start and keeps what Shutdown needs.
type builder struct {
	rt        *Runtime
	res       *resolution
	producers map[string][]*node
	sources   map[string]Source
	sinks     map[string]Sink
	codecs    map[*node]Codec // codec of a node's connector-bound port
	entries   []func()        // Shutdown step 2: stop what feeds the graph
	cancels   []func()        // Shutdown step 3: cancel stage subscriptions
	stages    []stage
	stopStage context.CancelFunc
}

func (b *builder) state(ch string) *chanState { return b.rt.state(ch) }

// stage is an engine seen by Shutdown.
type stage interface {
	Cancel()
	Wait()
	Running() int
}

func (b *builder) addStage(e stage) {
	b.cancels = append(b.cancels, e.Cancel)
	b.stages = append(b.stages, e)
}

// input returns the typed publisher feeding node n's input.
func (b *builder) input(ctx context.Context, n *node) (any, error) {
	ch := n.in.channel
	var pubs []any
	if src, ok := b.sources[ch]; ok {
		pubs = append(pubs, n.in.fromSource(ctx, b, src, b.codecs[n]))
	}
	for _, p := range b.producers[ch] {
		pub, err := p.output(ctx, b)
		if err != nil {
			return nil, err
		}
		pubs = append(pubs, pub)
	}
	if len(pubs) == 1 {
		return pubs[0], nil
	}
	return n.in.merge(pubs), nil
}

// Start validates the graph and the configuration, creates sinks then
// sources within ctx and subscribes every stream from the sinks upstream.
// All problems are returned together in one
// *AssemblyError; a failed runtime cannot be restarted.
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.phase != stateNew {
		r.mu.Unlock()
		return fmt.Errorf("%w: Start called on a runtime that was already started or stopped", ErrClosed)
	}
	r.phase = stateStarting
	nodes := slices.Clone(r.nodes)
	r.mu.Unlock()

	var channels []string
	for _, n := range nodes {
		if n.in != nil {
			channels = append(channels, n.in.channel)
		}
		if n.out != nil {
			channels = append(channels, n.out.channel)
		}
	}
	res := r.resolveConfig(channels)
	for _, w := range res.cfg.warnings {
		r.log.Warn("messaging: configuration", zap.String("warning", w))
	}
	b := &builder{rt: r, res: res, producers: map[string][]*node{}, sources: map[string]Source{}, sinks: map[string]Sink{}, codecs: map[*node]Codec{}}
	r.validate(nodes, res, b)
	for _, w := range res.warnings {
		r.log.Warn("messaging: assembly warning", zap.Error(w))
	}
	if len(res.problems) > 0 {
		r.setFailed()
		return &AssemblyError{Problems: res.problems, Warnings: res.warnings}
	}
	if err := r.createConnectors(ctx, res, b); err != nil {
		r.setFailed()
		return err
	}
	for ch := range b.sources {
		r.state(ch).markConnector()
	}
	for ch := range b.sinks {
		r.state(ch).markConnector()
	}
	stageCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.stopStage = cancel
	if err := wire(stageCtx, nodes, b); err != nil {
		cancel()
		r.setFailed()
		if cerr := r.closeConnectors(ctx, b); cerr != nil {
			r.log.Warn("messaging: release after a failed start", zap.Error(cerr))
		}
		return err
	}
	r.mu.Lock()
	r.b = b
	r.mu.Unlock()
	if err := r.awaitStarted(ctx, nodes); err != nil {
		r.shutOnce.Do(func() {
			if serr := r.shutdown(ctx); serr != nil {
				r.log.Warn("messaging: release after a failed start", zap.Error(serr))
			}
			close(r.shutDone)
		})
		r.setFailed()
		return err
	}
	r.mu.Lock()
	r.phase = stateStarted
	r.mu.Unlock()
	r.startedOK.Store(true)
	return nil
}

// awaitStarted waits until every channel reports started (its last
// subscriber saw OnSubscribe, its connector created its consumer or
// producer), polling the connectors' Health with a backoff of 1 to 50 ms.
// Channels read by Channel are not awaited: their subscriber may come after
// Start. If ctx ends first, the error names the channels not started and
// wraps ErrNotStarted, ctx.Err() and, for connector channels,
// ErrConnectorInit.
func (r *Runtime) awaitStarted(ctx context.Context, nodes []*node) error {
	userOnly := map[string]bool{}
	for _, n := range nodes {
		if n.shape == shapeChannel {
			userOnly[n.in.channel] = true
		}
	}
	delay := time.Millisecond
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	for {
		var pending []string
		connector := false
		for _, c := range r.Health().Channels {
			if c.Started || (userOnly[c.Channel] && c.Direction != Outgoing) {
				continue
			}
			pending = append(pending, describe(c))
			connector = connector || c.Direction != 0
		}
		if len(pending) == 0 {
			return nil
		}
		timer.Reset(delay)
		select {
		case <-timer.C:
			delay = min(2*delay, 50*time.Millisecond)
		case <-ctx.Done():
			errs := []error{ErrNotStarted, ctxErr(ctx)}
			if connector {
				errs = append(errs, ErrConnectorInit)
			}
			return fmt.Errorf("messaging: start: channel(s) not started: %s: %w", strings.Join(pending, ", "), errors.Join(errs...))
		}
	}
}

func describe(c ChannelHealth) string {
	s := c.Channel
	switch c.Direction {
	case Incoming:
		s += " (incoming)"
	case Outgoing:
		s += " (outgoing)"
	}
	if c.Reason != "" {
		s += ": " + c.Reason
	}
	return s
}

func (r *Runtime) setFailed() {
	r.mu.Lock()
	r.phase = stateFailed
	r.mu.Unlock()
}

func (r *Runtime) createConnectors(ctx context.Context, res *resolution, b *builder) error {
	var problems []*Problem
	classify := func(c *chanCfg, err error) {
		kind := ConnectorInit
		switch {
		case errors.Is(err, ErrMissingAttribute):
			kind = MissingAttribute
		case errors.Is(err, ErrInvalidAttribute):
			kind = InvalidAttribute
		}
		problems = append(problems, &Problem{Kind: kind, Channel: c.channel, Connector: c.connector.Name(), Err: err})
	}
	for _, ch := range slices.Sorted(maps.Keys(res.outgoing)) {
		c := res.outgoing[ch]
		oc, _ := c.connector.(OutgoingConnector)
		s, err := oc.NewSink(ctx, c.cfg)
		if err == nil && s == nil {
			err = fmt.Errorf("%w: connector returned a nil sink", ErrConnectorInit)
		}
		if err != nil {
			classify(c, err)
			continue
		}
		b.sinks[ch] = s
	}
	for _, ch := range slices.Sorted(maps.Keys(res.incoming)) {
		c := res.incoming[ch]
		ic, _ := c.connector.(IncomingConnector)
		s, err := ic.NewSource(ctx, c.cfg)
		if err == nil && s == nil {
			err = fmt.Errorf("%w: connector returned a nil source", ErrConnectorInit)
		}
		if err != nil {
			classify(c, err)
			continue
		}
		b.sources[ch] = s
	}
	if len(problems) == 0 {
		return nil
	}
	if err := r.closeConnectors(ctx, b); err != nil {
		r.log.Warn("messaging: release after a failed start", zap.Error(err))
	}
	return &AssemblyError{Problems: problems, Warnings: res.warnings}
}

// wire subscribes every consumer: sinks first, then stages and Channel.
func wire(ctx context.Context, nodes []*node, b *builder) error {
	for _, ch := range slices.Sorted(maps.Keys(b.sinks)) {
		sink := b.sinks[ch]
		var pubs []reactive.Publisher[Message[[]byte]]
		if src, ok := b.sources[ch]; ok { // incoming and outgoing connector on one name: a bridge
			pubs = append(pubs, bridge(ctx, b, src))
		}
		for _, p := range b.producers[ch] {
			pub, err := p.output(ctx, b)
			if err != nil {
				return err
			}
			pubs = append(pubs, p.out.toSink(ctx, b, pub, b.codecs[p]))
		}
		b.state(ch).subscribed()
		if len(pubs) == 1 {
			pubs[0].Subscribe(sink)
		} else {
			reactive.Merge(pubs...).Subscribe(sink)
		}
	}
	for _, n := range nodes {
		if n.consume == nil {
			continue
		}
		up, err := b.input(ctx, n)
		if err != nil {
			return err
		}
		n.consume(ctx, b, up)
	}
	return nil
}

func bridge(ctx context.Context, b *builder, src Source) reactive.Publisher[Message[[]byte]] {
	g := newGate(func(m Message[[]byte]) (Message[[]byte], bool) {
		return trackMessage(b.rt.track, m, m.Payload()), true
	}, nackDropped[[]byte](ctx), nil)
	b.entries = append(b.entries, g.Stop)
	return connectLazily[Message[[]byte]](g, func() { src.Subscribe(g) })
}

func (r *Runtime) closeConnectors(ctx context.Context, b *builder) error {
	var errs []error
	for _, ch := range slices.Sorted(maps.Keys(b.sources)) {
		if err := b.sources[ch].Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("messaging: close source %q: %w", ch, err))
		}
	}
	for _, ch := range slices.Sorted(maps.Keys(b.sinks)) {
		if err := b.sinks[ch].Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("messaging: close sink %q: %w", ch, err))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(r.connectors)) {
		if c, ok := r.connectors[name].(ConnectorCloser); ok {
			if err := c.Close(ctx); err != nil {
				errs = append(errs, fmt.Errorf("messaging: close connector %q: %w", name, err))
			}
		}
	}
	return errors.Join(errs...)
}

// Shutdown stops the runtime: readiness goes down and
// emitters stop accepting; sources, emitters and producers stop feeding the
// graph; in-flight messages are drained until ctx ends; then stage
// subscriptions are cancelled and sinks, sources and connectors closed. If ctx
// ends first, stage contexts are cancelled, the unsettled messages are nacked
// with ErrShutdown, and the error wraps ctx.Err(). Idempotent; concurrent
// callers share one result.
func (r *Runtime) Shutdown(ctx context.Context) error {
	first := false
	r.shutOnce.Do(func() { first = true })
	if !first {
		select {
		case <-r.shutDone:
			return r.shutErr
		case <-ctx.Done():
			return fmt.Errorf("messaging: shutdown: %w", ctx.Err())
		}
	}
	r.shutErr = r.shutdown(ctx)
	close(r.shutDone)
	return r.shutErr
}

func (r *Runtime) shutdown(ctx context.Context) error {
	r.shuttingDown.Store(true)
	r.mu.Lock()
	b := r.b
	r.phase = stateStopped
	stops := r.emitterStops
	r.mu.Unlock()
	for _, f := range stops {
		f()
	}
	if b == nil {
		close(r.done)
		return nil
	}
	for _, f := range b.entries {
		f()
	}
	var errs []error
	if err := r.track.wait(ctx); err != nil {
		// Nack before cancelling the stage contexts, so a function that
		// returns ctx.Err() cannot settle its message with another reason.
		n := r.track.nackAll(ctx, ErrShutdown)
		b.stopStage()
		errs = append(errs, fmt.Errorf("messaging: shutdown: %d message(s) unsettled: %w", n, err))
	}
	for _, f := range b.cancels {
		f()
	}
	b.stopStage()
	if err := r.closeConnectors(ctx, b); err != nil {
		errs = append(errs, err)
	}
	// A stage function that ignores its ctx cannot be stopped: Shutdown
	// returns at the deadline and the waiter below closes r.done once the
	// last such function returned (its result is discarded: its message was
	// nacked with ErrShutdown, and a stopped engine drops outputs).
	go func() {
		for _, s := range b.stages {
			s.Wait()
		}
		close(r.done)
	}()
	select {
	case <-r.done:
	case <-ctx.Done():
		running := 0
		for _, s := range b.stages {
			running += s.Running()
		}
		if running > 0 {
			errs = append(errs, fmt.Errorf("messaging: shutdown: %d stage invocation(s) still running, their results will be discarded (Done closes when they return): %w", running, ctxErr(ctx)))
		} else {
			<-r.done // only the engines' own bookkeeping is left: no user code runs
		}
	}
	return errors.Join(errs...)
}

// Done is closed once Shutdown has finished and every goroutine the runtime
// started has ended. After a Shutdown that returned at its deadline while
// stage functions ignored their ctx, Done closes when the last of them
// returned; their results are discarded.
func (r *Runtime) Done() <-chan struct{} { return r.done }

// Run starts the runtime and blocks until ctx is done (then it shuts down
// within babelqueue.messaging.shutdown-timeout and returns the Shutdown
// result) or a channel stops being live (then it shuts down and returns an
// error wrapping ErrChannelFailed). It installs no signal handler.
func (r *Runtime) Run(ctx context.Context) error {
	if err := r.Start(ctx); err != nil {
		return err
	}
	timeout := DefaultShutdownTimeout
	if v, ok := r.cfg.Get(KeyShutdownTimeout); ok {
		if d, err := parseDuration(v); err == nil && d > 0 {
			timeout = d
		}
	}
	stop := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		defer cancel()
		return r.Shutdown(sctx)
	}
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return stop()
		case <-r.dead:
		case <-ticker.C:
			if h := r.Health(); h.Live {
				continue
			}
		}
		reason := r.deadReason()
		return errors.Join(fmt.Errorf("%w: %s", ErrChannelFailed, reason), stop())
	}
}

func (r *Runtime) deadReason() string {
	var parts []string
	for _, c := range r.Health().Channels {
		if !c.Live {
			parts = append(parts, fmt.Sprintf("%s: %s", c.Channel, c.Reason))
		}
	}
	return strings.Join(parts, "; ")
}

// Health reports the started/ready/live state of every channel and the
// runtime's verdict.
func (r *Runtime) Health() HealthReport {
	r.mu.Lock()
	b := r.b
	states := maps.Clone(r.states)
	r.mu.Unlock()
	rep := HealthReport{}
	if b == nil {
		return rep
	}
	readyEx := exclusions(b.res.cfg, KeyReadyExclude)
	liveEx := exclusions(b.res.cfg, KeyLiveExclude)
	names := map[string]bool{}
	for ch := range states {
		names[ch] = true
	}
	for ch := range b.sources {
		names[ch] = true
	}
	for ch := range b.sinks {
		names[ch] = true
	}
	shutting := r.shuttingDown.Load()
	rep.Started, rep.Ready, rep.Live = r.startedOK.Load(), !shutting, true
	for _, ch := range slices.Sorted(maps.Keys(names)) {
		var hs []ChannelHealth
		st := states[ch]
		if src, ok := b.sources[ch]; ok {
			hs = append(hs, connectorHealth(ch, Incoming, src.Health(), st, shutting))
		}
		if sink, ok := b.sinks[ch]; ok {
			hs = append(hs, connectorHealth(ch, Outgoing, sink.Health(), st, shutting))
		}
		if len(hs) == 0 && st != nil {
			started, terminated, dead, reason := st.snapshot()
			hs = append(hs, ChannelHealth{Channel: ch, Started: started, Ready: started && !terminated && !shutting, Live: !dead, Reason: reason})
		}
		for _, h := range hs {
			enabled := true
			switch h.Direction {
			case Incoming:
				enabled = b.res.incoming[ch].health
			case Outgoing:
				enabled = b.res.outgoing[ch].health
			}
			rep.Channels = append(rep.Channels, h)
			rep.Started = rep.Started && h.Started
			if enabled && !readyEx[ch] {
				rep.Ready = rep.Ready && h.Ready
			}
			if enabled && !liveEx[ch] {
				rep.Live = rep.Live && h.Live
			}
		}
	}
	if rep.Started {
		r.everStarted.Store(true)
	}
	rep.Started = rep.Started || r.everStarted.Load()
	rep.Ready = rep.Ready && rep.Started
	return rep
}

// connectorHealth combines what a connector reports of a channel end with
// what the runtime observed of its stream: a failure, a cancel or a
// completion outside Shutdown makes the channel not live. A completion
// reported by the connector during Shutdown is the orderly end of the drain
// and leaves it live.
func connectorHealth(ch string, d Direction, h ChannelHealth, st *chanState, shutting bool) ChannelHealth {
	h.Channel, h.Direction = ch, d
	if h.Completed && !h.Live && shutting {
		h.Live = true
	}
	if st != nil {
		_, _, dead, reason := st.snapshot()
		if dead {
			h.Live, h.Ready = false, false
			if h.Reason == "" {
				h.Reason = reason
			} else {
				h.Reason = reason + "; " + h.Reason
			}
		}
	}
	return h
}

func exclusions(cfg Config, key string) map[string]bool {
	out := map[string]bool{}
	if v, ok := cfg.Get(key); ok {
		for _, ch := range splitList(v) {
			out[ch] = true
		}
	}
	return out
}
