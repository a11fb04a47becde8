package messaging

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
)

// ChannelHealth is the health of one channel (RUNTIME.md §10).
type ChannelHealth struct {
	Channel   string
	Direction Direction // 0 for internal channels
	Started   bool
	Ready     bool
	Live      bool
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
	started    bool
	terminated bool
	dead       bool
	reasons    []string
	onDead     func() // called after a failure is recorded; may be nil
}

func (s *chanState) subscribed() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.started = true
	s.mu.Unlock()
}

func (s *chanState) completed() {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.terminated = true
	s.mu.Unlock()
}

// failed records an OnError, or a cancellation outside Shutdown: not live.
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
