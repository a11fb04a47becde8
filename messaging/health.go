package messaging

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// ChannelHealth is the health of one channel.
//
// Started: the stream was assembled, the channel's last subscriber saw
// OnSubscribe, and the connector (if any) created its consumer or producer.
// Ready: started, and no connection-class failure since the connector's last
// successful broker interaction; an internal channel is ready while started
// and not terminated. Live: no Cancel or OnError on the stream outside
// Shutdown and no fatal failure recorded by the connector; an OnComplete
// makes a connector channel not live (its messages stopped flowing for good),
// while an internal channel stays live.
type ChannelHealth struct {
	Channel   string
	Direction Direction // 0 for internal channels
	Started   bool
	Ready     bool
	Live      bool
	// Completed reports that the stream ended with OnComplete and that this
	// is the only reason the channel is not live (no fatal failure). The
	// runtime treats such a channel as live during Shutdown: completing is
	// the orderly end of the drain.
	Completed bool
	Reason    string // last failures, newest first (at most 10)
}

// HealthReport is the runtime's verdict and its channels.
type HealthReport struct {
	Started bool
	Ready   bool
	Live    bool
	// Channels are sorted by name (and direction).
	Channels []ChannelHealth
}

// Probe selects the verdict a HealthHandler reports.
type Probe int

// The probes.
const (
	ProbeStarted Probe = iota + 1
	ProbeReady
	ProbeLive
)

const maxReasons = 10

// chanState is what the runtime observes of one channel's stream. A nil
// *chanState ignores every call (stages built outside a runtime).
type chanState struct {
	mu         sync.Mutex
	channel    string
	started    bool
	terminated bool
	dead       bool
	connector  bool // the channel has a source or a sink
	reasons    []string
	onDead     func()      // called after a failure is recorded; may be nil
	stopping   func() bool // reports that Shutdown has begun; may be nil
}

func (s *chanState) isStopping() bool { return s.stopping != nil && s.stopping() }

func (s *chanState) markConnector() {
	s.mu.Lock()
	s.connector = true
	s.mu.Unlock()
}

// cancelled records a Cancel of the channel's stream by who: outside
// Shutdown the channel is no longer live.
func (s *chanState) cancelled(who string) {
	if s == nil || s.isStopping() {
		return
	}
	s.failed(fmt.Errorf("%w: %s cancelled channel %q outside Shutdown", ErrStreamCancelled, who, s.channel))
}

func (s *chanState) subscribed() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
}

// completed records an OnComplete: a connector channel completed outside
// Shutdown is no longer live; an internal channel stays live.
func (s *chanState) completed() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.terminated = true
	connector := s.connector
	s.mu.Unlock()
	if connector && !s.isStopping() {
		s.failed(fmt.Errorf("%w: connector channel %q completed outside Shutdown", ErrStreamCompleted, s.channel))
	}
}

// failed records an OnError, a cancellation outside Shutdown or a connector
// channel's completion outside Shutdown: not live.
func (s *chanState) failed(err error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.terminated, s.dead = true, true
	s.reasons = slices.Insert(s.reasons, 0, err.Error())
	if len(s.reasons) > maxReasons {
		s.reasons = s.reasons[:maxReasons]
	}
	notify := s.onDead
	s.mu.Unlock()
	if notify != nil {
		notify()
	}
}

func (s *chanState) snapshot() (started, terminated, dead bool, reason string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, s.terminated, s.dead, strings.Join(s.reasons, "; ")
}

// HealthHandler answers 200 when the probe's verdict is UP, else 503, with a
// MicroProfile Health style JSON body:
// {"status":"UP","checks":[{"name":"messaging","status":"UP","data":{"orders-in":"UP"}}]}.
func (r *Runtime) HealthHandler(p Probe) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		rep := r.Health()
		up := rep.verdict(p)
		data := map[string]string{}
		for _, c := range rep.Channels {
			data[c.Channel] = status(c.verdict(p))
		}
		body := healthBody{Status: status(up), Checks: []healthCheck{{Name: "messaging", Status: status(up), Data: data}}}
		w.Header().Set("Content-Type", "application/json")
		if up {
			w.WriteHeader(http.StatusOK)
		} else {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(body)
	})
}

type healthBody struct {
	Status string        `json:"status"`
	Checks []healthCheck `json:"checks"`
}

type healthCheck struct {
	Name   string            `json:"name"`
	Status string            `json:"status"`
	Data   map[string]string `json:"data,omitempty"`
}

func status(up bool) string {
	if up {
		return "UP"
	}
	return "DOWN"
}

func (h HealthReport) verdict(p Probe) bool {
	switch p {
	case ProbeStarted:
		return h.Started
	case ProbeReady:
		return h.Ready
	case ProbeLive:
		return h.Live
	default:
		return false
	}
}

func (c ChannelHealth) verdict(p Probe) bool {
	switch p {
	case ProbeStarted:
		return c.Started
	case ProbeReady:
		return c.Ready
	case ProbeLive:
		return c.Live
	default:
		return false
	}
}

// EndpointHealth records what a connector observes of one end of a channel
// (a Source or a Sink) and reports it by the runtime's rules, so every
// connector answers Health the same way. Call the Mark methods as things
// happen and return Health from the Source's or Sink's Health method:
//
//   - MarkStarted once the consumer or producer exists and the stream is
//     subscribed: Started.
//   - MarkFailed(err) for a fatal failure (an unrecoverable receive or send
//     error, a failure strategy that gives up): not live, not ready.
//   - MarkCompleted when the stream ends with OnComplete (a Source that
//     completed its subscriber, a Sink that received OnComplete): not live,
//     not ready, Completed set; unless MarkClosed came first, since a
//     completion caused by Close is the orderly end.
//   - MarkConnectionFailed(err) for a connection-class failure: not ready
//     until MarkConnected reports the next successful broker interaction.
//   - MarkClosed when Close begins: not ready.
//
// Reasons are kept newest first, at most 10. The methods are safe for
// concurrent use; a nil *EndpointHealth is not.
type EndpointHealth struct {
	channel string
	dir     Direction

	mu        sync.Mutex
	started   bool
	closed    bool
	completed bool // completed before Close
	dead      bool
	connErr   error
	reasons   []string
}

// NewEndpointHealth returns the health record of the d end of channel.
func NewEndpointHealth(channel string, d Direction) *EndpointHealth {
	return &EndpointHealth{channel: channel, dir: d}
}

func (h *EndpointHealth) reasonLocked(r string) {
	h.reasons = slices.Insert(h.reasons, 0, r)
	if len(h.reasons) > maxReasons {
		h.reasons = h.reasons[:maxReasons]
	}
}

// MarkStarted records that the endpoint's consumer or producer exists and
// its stream is subscribed.
func (h *EndpointHealth) MarkStarted() {
	h.mu.Lock()
	h.started = true
	h.mu.Unlock()
}

// MarkFailed records a fatal failure: the endpoint is no longer live.
func (h *EndpointHealth) MarkFailed(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", ErrNilArgument))
	}
	h.mu.Lock()
	h.dead = true
	h.reasonLocked(err.Error())
	h.mu.Unlock()
}

// MarkCompleted records that the stream ended with OnComplete; before Close
// the endpoint is no longer live.
func (h *EndpointHealth) MarkCompleted() {
	h.mu.Lock()
	if !h.closed && !h.completed {
		h.completed = true
		h.reasonLocked(fmt.Sprintf("%v: %s channel %q completed", ErrStreamCompleted, h.dir, h.channel))
	}
	h.mu.Unlock()
}

// MarkConnectionFailed records a connection-class failure: not ready until
// MarkConnected.
func (h *EndpointHealth) MarkConnectionFailed(err error) {
	if err == nil {
		panic(fmt.Errorf("%w: error", ErrNilArgument))
	}
	h.mu.Lock()
	h.connErr = err
	h.reasonLocked(err.Error())
	h.mu.Unlock()
}

// MarkConnected records a successful broker interaction; it clears a
// connection-class failure.
func (h *EndpointHealth) MarkConnected() {
	h.mu.Lock()
	h.connErr = nil
	h.mu.Unlock()
}

// MarkClosed records that Close began: the endpoint is no longer ready.
func (h *EndpointHealth) MarkClosed() {
	h.mu.Lock()
	h.closed = true
	h.mu.Unlock()
}

// Health returns the endpoint's ChannelHealth.
func (h *EndpointHealth) Health() ChannelHealth {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := ChannelHealth{Channel: h.channel, Direction: h.dir, Started: h.started, Completed: h.completed && !h.dead}
	c.Live = !h.dead && !h.completed
	c.Ready = h.started && c.Live && !h.closed && h.connErr == nil
	c.Reason = strings.Join(h.reasons, "; ")
	return c
}
