package interop_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvRequired, set to 1, turns a peer that cannot run (no python3, no venv module, packages
// that cannot be installed) into a failure instead of a skip: a CI step that installed the
// peer's runtime must not pass on skips.
const EnvRequired = "INTEROP_REQUIRED"

// peerUnavailable ends a test whose peer cannot run, for reason: it skips, unless
// INTEROP_REQUIRED=1, where it fails. This is the one place of that rule: plain
// `go test ./...` needs nothing but Go, and a missing Python never fails it.
func peerUnavailable(tb testing.TB, reason string) {
	tb.Helper()
	if os.Getenv(EnvRequired) == "1" {
		tb.Fatalf("%s=1, but %s", EnvRequired, reason)
	}
	tb.Skip(reason)
}

const (
	requirementsFile = "python/requirements.txt"
	peerScript       = "python/peer.py"
	// peerTimeout bounds one run of the peer program.
	peerTimeout = 2 * time.Minute
	// lockWait bounds how long a test waits for another process building the same venv.
	lockWait = 10 * time.Minute
)

// pythonPeer is the Python peer: the virtual environment's interpreter and peer.py.
type pythonPeer struct {
	python   string
	script   string
	versions peerVersions
}

type peerVersions struct {
	Python       string `json:"python"`
	BabelQueue   string `json:"babelqueue"`
	PulsarClient string `json:"pulsar_client"`
}

// String names the peer as the README and the skip reasons do.
func (v peerVersions) String() string {
	return fmt.Sprintf("babelqueue %s (pulsar-client %s, Python %s)", v.BabelQueue, v.PulsarClient, v.Python)
}

var (
	pythonOnce   sync.Once
	pythonShared *pythonPeer
	pythonReason string // why the peer cannot run; "" when it can
)

// pythonFor returns the Python peer, building its virtual environment on the first call of the
// process, or ends the test through peerUnavailable.
func pythonFor(t *testing.T) *pythonPeer {
	t.Helper()
	if testing.Short() {
		peerUnavailable(t, "-short: the interop suite runs the peer SDKs as separate processes")
	}
	pythonOnce.Do(func() { pythonShared, pythonReason = setupPython(t) })
	if pythonReason != "" {
		peerUnavailable(t, pythonReason)
	}
	return pythonShared
}

// setupPython finds python3, builds (or reuses) the virtual environment of requirements.txt and
// asks the peer for its versions. It returns the reason when any step fails.
func setupPython(t *testing.T) (*pythonPeer, string) {
	t.Helper()
	python3, err := exec.LookPath("python3")
	if err != nil {
		return nil, "python3 is not installed (the Python peer needs Python 3.9 or newer with the venv module)"
	}
	req, err := os.ReadFile(requirementsFile)
	if err != nil {
		return nil, "read " + requirementsFile + ": " + err.Error()
	}
	script, err := filepath.Abs(peerScript)
	if err != nil {
		return nil, err.Error()
	}
	// Read it, so that go test's cache knows the results depend on it.
	if _, err := os.ReadFile(script); err != nil {
		return nil, "read " + peerScript + ": " + err.Error()
	}
	reqPath, err := filepath.Abs(requirementsFile)
	if err != nil {
		return nil, err.Error()
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sum := sha256.Sum256(req)
	dir := filepath.Join(cache, "babelqueue-interop", "python-"+hex.EncodeToString(sum[:8]))

	start := time.Now()
	built, reason := ensureVenv(t, python3, dir, reqPath)
	if reason != "" {
		return nil, reason
	}
	p := &pythonPeer{python: venvPython(dir), script: script}
	if err := p.exec(t, "versions", map[string]any{}, &p.versions); err != nil {
		return nil, "the Python peer does not start in " + dir + ": " + err.Error()
	}
	if built {
		t.Logf("interop: built the Python virtual environment %s in %s: %s", dir, time.Since(start).Round(time.Millisecond), p.versions)
	} else {
		t.Logf("interop: reused the Python virtual environment %s (%s ready): %s", dir, time.Since(start).Round(time.Millisecond), p.versions)
	}
	return p, ""
}

func venvPython(dir string) string {
	if runtime.GOOS == "windows" {
		return filepath.Join(dir, "Scripts", "python.exe")
	}
	return filepath.Join(dir, "bin", "python")
}

// ensureVenv makes dir a virtual environment with the requirements installed, unless a
// complete one is already there (its marker file holds the requirements' path). A lock file
// beside it keeps two test processes from building it at once. built says whether it was
// built now; reason says why it could not be.
func ensureVenv(t *testing.T, python3, dir, reqPath string) (built bool, reason string) {
	t.Helper()
	marker := filepath.Join(dir, ".babelqueue-interop-ready")
	if _, err := os.Stat(marker); err == nil {
		return false, ""
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return false, "create the cache directory: " + err.Error()
	}
	unlock, err := lockFile(t.Context(), dir+".lock")
	if err != nil {
		return false, "lock " + dir + ".lock: " + err.Error()
	}
	defer unlock()
	if _, err := os.Stat(marker); err == nil {
		return false, "" // another process built it while this one waited
	}
	_ = os.RemoveAll(dir) // an incomplete attempt
	steps := []struct {
		what string
		hint string
		args []string
	}{
		{"python3 -m venv", " (on Debian and Ubuntu: apt-get install python3-venv)", []string{python3, "-m", "venv", dir}},
		{"pip install -r " + requirementsFile, " (pip needs network access to PyPI, or a configured index)", []string{
			venvPython(dir), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--quiet",
			"--retries", "2", "--timeout", "30", "-r", reqPath,
		}},
		{"import babelqueue and pulsar", "", []string{venvPython(dir), "-c", "import babelqueue.pulsar_transport, pulsar"}},
	}
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(t.Context(), lockWait)
		out, err := exec.CommandContext(ctx, s.args[0], s.args[1:]...).CombinedOutput()
		cancel()
		if err != nil {
			_ = os.RemoveAll(dir)
			return false, fmt.Sprintf("%s failed%s: %v: %s", s.what, s.hint, err, tail(out, 600))
		}
	}
	if err := os.WriteFile(marker, []byte(reqPath+"\n"), 0o600); err != nil {
		return false, "write " + marker + ": " + err.Error()
	}
	return true, ""
}

// lockFile creates path exclusively, waiting while another process holds it (a lock older
// than lockWait is stale and taken over), and returns the function that removes it.
func lockFile(ctx context.Context, path string) (func(), error) {
	deadline := time.Now().Add(lockWait)
	for {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err == nil {
			_ = f.Close()
			return func() { _ = os.Remove(path) }, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		if st, serr := os.Stat(path); serr == nil && time.Since(st.ModTime()) > lockWait {
			_ = os.Remove(path)
			continue
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("held by another process for more than %s", lockWait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// run runs peer.py cmd with spec, decoding its result into out; a failed run fails the test.
func (p *pythonPeer) run(t *testing.T, cmd string, spec, out any) {
	t.Helper()
	if err := p.exec(t, cmd, spec, out); err != nil {
		t.Fatalf("python peer: %v", err)
	}
}

// exec runs peer.py cmd with spec as a separate process and decodes its result into out. The
// peer's stderr (the Pulsar client's and the SDK's warnings) goes to the test log.
func (p *pythonPeer) exec(t *testing.T, cmd string, spec, out any) error {
	t.Helper()
	dir := t.TempDir()
	specPath, outPath := filepath.Join(dir, "spec.json"), filepath.Join(dir, "result.json")
	b, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode the spec: %w", err)
	}
	if err := os.WriteFile(specPath, b, 0o600); err != nil {
		return fmt.Errorf("write the spec: %w", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), peerTimeout)
	defer cancel()
	c := exec.CommandContext(ctx, p.python, p.script, cmd, specPath, outPath)
	// PYTHONFAULTHANDLER: a crash of the Pulsar client's native code (a segmentation fault of
	// pulsar-client 3.13.0 failed one CI run, with no output at all) prints the Python stack
	// of every thread, so the failure says which call crashed.
	c.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONUNBUFFERED=1", "PYTHONIOENCODING=utf-8", "PYTHONFAULTHANDLER=1")
	var output bytes.Buffer
	c.Stdout, c.Stderr = &output, &output
	start := time.Now()
	err = c.Run()
	took := time.Since(start).Round(time.Millisecond)
	if err != nil {
		when := "before it wrote its result"
		if _, serr := os.Stat(outPath); serr == nil {
			when = "after it wrote its result (on its way out)"
		}
		return fmt.Errorf("%s %s: %w after %s, %s\n%s", filepath.Base(p.script), cmd, err, took, when, tail(output.Bytes(), 4000))
	}
	if s := strings.TrimSpace(output.String()); s != "" {
		t.Logf("python peer %s (%s) said:\n%s", cmd, took, tail([]byte(s), 4000))
	}
	res, err := os.ReadFile(outPath)
	if err != nil {
		return fmt.Errorf("%s %s wrote no result: %w", filepath.Base(p.script), cmd, err)
	}
	dec := json.NewDecoder(bytes.NewReader(res))
	dec.UseNumber()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("decode the result of %s: %w: %s", cmd, err, tail(res, 2000))
	}
	return nil
}

// tail returns the last n bytes of b as text.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = append([]byte("…"), b[len(b)-n:]...)
	}
	return string(b)
}
