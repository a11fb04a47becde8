package pulsar

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// HealthChecker is anything that reports a [Health]: a [Consumer], say.
type HealthChecker interface {
	Health() Health
}

// HealthHandler returns an http.Handler for liveness and readiness probes over checks
// (consumers, say):
//
//   - a GET or HEAD of a path ending in /live answers 200 when every check is live, else 503;
//   - a path ending in /ready answers 200 when every check is ready, else 503;
//   - any other path answers 404, and another method 405.
//
// Mount it where the probes look, as it is or under a prefix: mux.Handle("/health/",
// HealthHandler(c)) serves /health/live and /health/ready. The body is JSON in the
// MicroProfile Health style, with each check's reasons (see [Health]):
//
//	{"status":"DOWN","checks":[{"name":"billing","status":"DOWN","live":true,"ready":false,
//	 "reasons":["receive failing: connection refused"]}]}
//
// A check is named by [NamedHealthCheck], else "check-<n>" (1 for the first). A nil check
// is reported as down (reason "nil health checker"), so a wiring mistake shows in the
// probe. With no checks both probes answer 200. Each request calls every check's Health
// once.
func HealthHandler(checks ...HealthChecker) http.Handler {
	list := make([]namedCheck, len(checks))
	for i, c := range checks {
		nc, ok := c.(namedCheck)
		if !ok {
			nc = namedCheck{name: "check-" + strconv.Itoa(i+1), c: c}
		}
		list[i] = nc
	}
	return healthHandler{checks: list}
}

// NamedHealthCheck gives c a name for the body of [HealthHandler].
func NamedHealthCheck(name string, c HealthChecker) HealthChecker {
	return namedCheck{name: name, c: c}
}

type namedCheck struct {
	name string
	c    HealthChecker
}

// Health returns the health of the named check (not live, with a reason, when it is nil).
func (n namedCheck) Health() Health {
	if n.c == nil {
		return Health{Reasons: []string{"nil health checker"}}
	}
	return n.c.Health()
}

type healthHandler struct{ checks []namedCheck }

type healthBody struct {
	Status string        `json:"status"`
	Checks []healthEntry `json:"checks"`
}

type healthEntry struct {
	Name    string   `json:"name"`
	Status  string   `json:"status"`
	Live    bool     `json:"live"`
	Ready   bool     `json:"ready"`
	Reasons []string `json:"reasons,omitempty"`
	// Warnings are the check's Health.Warnings.
	Warnings []string `json:"warnings,omitempty"`
}

func (h healthHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	var ready bool
	switch {
	case strings.HasSuffix(path, "/live") || path == "live":
	case strings.HasSuffix(path, "/ready") || path == "ready":
		ready = true
	default:
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body := healthBody{Status: "UP", Checks: make([]healthEntry, 0, len(h.checks))}
	for _, c := range h.checks {
		hs := c.Health()
		up := hs.Live
		if ready {
			up = hs.Ready
		}
		e := healthEntry{Name: c.name, Status: upDown(up), Live: hs.Live, Ready: hs.Ready, Reasons: hs.Reasons, Warnings: hs.Warnings}
		if !up {
			body.Status = "DOWN"
		}
		body.Checks = append(body.Checks, e)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if body.Status == "UP" {
		w.WriteHeader(http.StatusOK)
	} else {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	if r.Method == http.MethodHead {
		return
	}
	_ = json.NewEncoder(w).Encode(body) //nolint:errchkjson // a failed write to the prober has nobody to report to
}

func upDown(up bool) string {
	if up {
		return "UP"
	}
	return "DOWN"
}
