package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"
)

// dashboard is what the test reads of the Grafana dashboard.
type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title      string `json:"title"`
		Datasource struct {
			Type string `json:"type"`
		} `json:"datasource"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// rateInterval replaces Grafana's $__rate_interval: several scrapes at the test's 1 s interval.
const rateInterval = "30s"

// TestDashboardPanelsReturnSeries: Prometheus (Debian's prometheus package) scrapes this
// program's /metrics while it works, and every query of every panel of
// deploy/grafana/babelqueue.json returns series through Prometheus's HTTP API. A panel that
// names a metric or a label this program does not export returns none, and fails.
func TestDashboardPanelsReturnSeries(t *testing.T) {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no prometheus binary under CI (.ci/run installs Debian's prometheus package): %v", err)
		}
		t.Skip("no prometheus binary (apt-get install prometheus): the dashboard's queries need a real Prometheus")
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", "grafana", "babelqueue.json"))
	require.NoError(t, err)
	var dash dashboard
	require.NoError(t, json.Unmarshal(raw, &dash))
	require.NotEmpty(t, dash.Panels)

	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	served := make(chan string, 1)
	work := make(chan struct{})
	ran := make(chan error, 1)
	go func() {
		ran <- run(ctx, io.Discard, options{serving: func(base string) { served <- base }, work: work})
	}()
	var base string
	select {
	case base = <-served:
	case err := <-ran:
		t.Fatalf("the program ended before serving /metrics: %v", err)
	}
	defer func() {
		close(work)
		require.NoError(t, <-ran)
	}()

	api := startPrometheus(ctx, t, bin, strings.TrimPrefix(base, "http://"))
	// Enough scrapes of the working program for every rate window, the dead letters
	// included (order 3 is the first).
	waitForSamples(ctx, t, api, `count_over_time(babelqueue_consumer_dead_lettered_total[1m])`, 5)

	var missing []string
	for _, p := range dash.Panels {
		require.Equal(t, "prometheus", p.Datasource.Type, "panel %q", p.Title)
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
		for _, tg := range p.Targets {
			expr := strings.ReplaceAll(tg.Expr, "$__rate_interval", rateInterval)
			v, _, err := api.Query(ctx, expr, time.Now())
			require.NoError(t, err, "panel %q, query %s: %s", p.Title, tg.RefID, expr)
			vec, ok := v.(model.Vector)
			require.True(t, ok, "panel %q, query %s: an instant vector, not %s", p.Title, tg.RefID, v.Type())
			if len(vec) == 0 {
				missing = append(missing, fmt.Sprintf("%q %s: %s", p.Title, tg.RefID, expr))
				continue
			}
			t.Logf("%-42s %s: %d series, e.g. %s", p.Title, tg.RefID, len(vec), vec[0])
		}
	}
	require.Empty(t, missing, "panels whose query returns no series")
}

// startPrometheus runs Prometheus, scraping target every second into a fresh data
// directory, until the test ends, and returns its HTTP API once it is ready.
func startPrometheus(ctx context.Context, t *testing.T, bin, target string) promv1.API {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "prometheus.yml")
	require.NoError(t, os.WriteFile(config, fmt.Appendf(nil, `global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: observability
    static_configs:
      - targets: [%q]
`, target), 0o600))
	addr := freeAddr(ctx, t)
	logFile, err := os.Create(filepath.Join(dir, "prometheus.log"))
	require.NoError(t, err)
	cmd := exec.Command(bin, "--config.file="+config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			t.Logf("prometheus stopped: %v", err)
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Logf("prometheus killed: %v", <-exited)
		}
		_ = logFile.Close()
	})

	transport := &http.Transport{}
	t.Cleanup(transport.CloseIdleConnections)
	httpClient := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	for ready := false; !ready; {
		select {
		case err := <-exited:
			log, _ := os.ReadFile(logFile.Name())
			t.Fatalf("prometheus exited: %v\n%s", err, log)
		case <-ctx.Done():
			t.Fatalf("prometheus was not ready: %v", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/-/ready", nil)
		require.NoError(t, err)
		if resp, err := httpClient.Do(req); err == nil {
			ready = resp.StatusCode == http.StatusOK
			_ = resp.Body.Close()
		}
	}
	c, err := promapi.NewClient(promapi.Config{Address: "http://" + addr, Client: httpClient})
	require.NoError(t, err)
	return promv1.NewAPI(c)
}

// waitForSamples waits until the instant query expr returns a value of at least n.
func waitForSamples(ctx context.Context, t *testing.T, api promv1.API, expr string, n float64) {
	t.Helper()
	var last error
	for {
		v, _, err := api.Query(ctx, expr, time.Now())
		if err == nil {
			if vec, ok := v.(model.Vector); ok && len(vec) > 0 && float64(vec[0].Value) >= n {
				return
			}
			last = fmt.Errorf("%s = %v", expr, v)
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Prometheus did not get %v samples: %v (last: %v)", n, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(ctx context.Context, t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}
