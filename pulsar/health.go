package pulsar

import (
	"slices"
	"sync"
	"sync/atomic"
)

// healthState tracks liveness and readiness: not live after a fatal failure or a stop; not
// ready while any area (receive, ack, settlement write) failed last.
type healthState struct {
	nfailed  atomic.Int32 // len(failed), read without the lock on the hot path
	mu       sync.Mutex
	dead     string           // why not live ("" while live)
	failed   map[string]error // area → its last error, while failing
	warnings []string         // newest first, at most maxWarnings
}

// maxWarnings bounds Health.Warnings.
const maxWarnings = 5

// warn records an event an operator should see that does not make the endpoint unready.
func (h *healthState) warn(msg string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.warnings = append([]string{msg}, h.warnings...)
	if len(h.warnings) > maxWarnings {
		h.warnings = h.warnings[:maxWarnings]
	}
}

func (h *healthState) init() { h.failed = map[string]error{} }

func (h *healthState) failing(area string, err error) {
	h.mu.Lock()
	h.failed[area] = err
	h.nfailed.Store(int32(len(h.failed))) //nolint:gosec // a handful of areas
	h.mu.Unlock()
}

// ok clears area's failure; with nothing failing (the steady state) it takes no lock.
func (h *healthState) ok(area string) {
	if h.nfailed.Load() != 0 { // small enough to be inlined: the common case, nothing failed, pays no call
		h.clear(area)
	}
}

// clear is ok's work when some area has failed.
func (h *healthState) clear(area string) {
	h.mu.Lock()
	delete(h.failed, area)
	h.nfailed.Store(int32(len(h.failed))) //nolint:gosec // a handful of areas
	h.mu.Unlock()
}

func (h *healthState) fatal(err error) {
	h.mu.Lock()
	if h.dead == "" {
		h.dead = err.Error()
	}
	h.mu.Unlock()
}

func (h *healthState) stopped() {
	h.mu.Lock()
	if h.dead == "" {
		h.dead = "stopped"
	}
	h.mu.Unlock()
}

// get returns the health: the reasons are the fatal one first, then every failing area
// (in a stable order).
func (h *healthState) get() Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	var reasons []string
	if h.dead != "" {
		reasons = append(reasons, h.dead)
	}
	areas := make([]string, 0, len(h.failed))
	for a := range h.failed {
		areas = append(areas, a)
	}
	slices.Sort(areas)
	for _, a := range areas {
		reasons = append(reasons, a+" failing: "+h.failed[a].Error())
	}
	return Health{
		Live: h.dead == "", Ready: h.dead == "" && len(h.failed) == 0, Reasons: reasons,
		Warnings: append([]string(nil), h.warnings...),
	}
}

// Health is the state of a consumer (or another endpoint of this package) for liveness and
// readiness probes.
type Health struct {
	// Live is false once the endpoint has stopped for good (closed, or its Pulsar consumer
	// failed): a liveness probe should restart the process.
	Live bool
	// Ready is true while the endpoint works: live, connected, and its last receive and
	// settlement writes succeeded.
	Ready bool
	// Reasons says why the endpoint is not ready or not live: the fatal reason first, then
	// each failing area (receive, ack, settlement write) with its last error.
	Reasons []string
	// Warnings are recent events an operator should see that do not make the endpoint
	// unready, newest first (at most 5): a dead-letter copy truncated to fit the broker.
	Warnings []string
}
