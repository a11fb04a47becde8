package conformance

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Status is the outcome of one block or case.
type Status int

// The statuses a [Result] can have.
const (
	// StatusPass: the case holds against this SDK's code.
	StatusPass Status = iota + 1
	// StatusFail: the case does not hold; Result.Reason says why.
	StatusFail
	// StatusNotApplicable: the block concerns something this SDK does not ship (another
	// broker's binding).
	StatusNotApplicable
	// StatusUnknown: the runner does not understand the block or case. It fails the run
	// unless [WithSkipUnknown] is set, in which case it is reported as StatusSkipped.
	StatusUnknown
	// StatusSkipped: an unknown block or case, skipped on request.
	StatusSkipped
)

// String returns the label used in reports: PASS, FAIL, N/A, UNKNOWN or SKIP.
func (s Status) String() string {
	switch s {
	case StatusPass:
		return "PASS"
	case StatusFail:
		return "FAIL"
	case StatusNotApplicable:
		return "N/A"
	case StatusUnknown:
		return "UNKNOWN"
	case StatusSkipped:
		return "SKIP"
	default:
		return fmt.Sprintf("Status(%d)", int(s))
	}
}

// Result is the outcome of one case of one block, or of a whole block when Case is empty
// (a block that is not applicable or not understood).
type Result struct {
	// Block is the manifest path of the block, such as "cases" or
	// "pulsar.attempts_reconciliation".
	Block string
	// Case names the case within the block; empty for a whole-block result.
	Case string
	// Status is the outcome.
	Status Status
	// Reason explains a failure, a non-applicable block or an unknown one.
	Reason string
}

// Name is "block/case", or the block alone for a whole-block result.
func (r Result) Name() string {
	if r.Case == "" {
		return r.Block
	}
	return r.Block + "/" + r.Case
}

// Summary counts the results of a run.
type Summary struct {
	Passed, Failed, NotApplicable, Skipped int
}

// OK reports whether nothing failed.
func (s Summary) OK() bool { return s.Failed == 0 }

// Option configures [Load].
type Option interface{ apply(*Suite) }

type optionFunc func(*Suite)

func (f optionFunc) apply(s *Suite) { f(s) }

// WithSkipUnknown reports blocks and cases the runner does not understand as skipped
// instead of failing the run. Default: false (an unknown block fails the run, so a newer
// manifest never passes silently).
func WithSkipUnknown(skip bool) Option {
	return optionFunc(func(s *Suite) { s.skipUnknown = skip })
}

// Suite is a loaded conformance suite directory: a manifest.json and the fixtures it names.
type Suite struct {
	dir         string
	blocks      []block
	skipUnknown bool
}

// Load reads dir/manifest.json. It fails with an error wrapping [ErrSuite] when the file is
// missing or not a JSON object, or when it has no schema_version or one that is not
// [ManifestSchemaVersion].
// Fixtures are read when the suite runs.
func Load(dir string, opts ...Option) (*Suite, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json")) //nolint:gosec // reading the suite the caller names is the point
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSuite, err)
	}
	blocks, err := orderedObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: manifest.json: %w", ErrSuite, err)
	}
	s := &Suite{dir: dir}
	version, versioned := 0, false
	for _, b := range blocks {
		if b.name != "schema_version" {
			s.blocks = append(s.blocks, b)
			continue
		}
		versioned = true
		if err := json.Unmarshal(b.raw, &version); err != nil {
			return nil, fmt.Errorf("%w: manifest.json: schema_version: %w", ErrSuite, err)
		}
	}
	if !versioned {
		return nil, fmt.Errorf("%w: manifest.json has no schema_version (this runner understands %d)", ErrSuite, ManifestSchemaVersion)
	}
	if version != ManifestSchemaVersion {
		return nil, fmt.Errorf("%w: manifest.json: schema_version %d, this runner understands %d",
			ErrSuite, version, ManifestSchemaVersion)
	}
	for _, o := range opts {
		o.apply(s)
	}
	return s, nil
}

// Dir returns the suite directory.
func (s *Suite) Dir() string { return s.dir }

// notApplicable lists the blocks that concern something this SDK does not ship, with the
// reason reported for each.
var notApplicable = map[string]string{
	"sqs":      "another broker's binding (Amazon SQS)",
	"asb":      "another broker's binding (Azure Service Bus)",
	"kafka":    "another broker's binding (Apache Kafka)",
	"artemis":  "another broker's binding (ActiveMQ Artemis)",
	"redis":    "another broker's binding (Redis)",
	"rabbitmq": "another broker's binding (RabbitMQ)",
}

// Results runs every block of the suite against this SDK's code and returns one result per
// case (or per block, for blocks that are not applicable or not understood), in manifest
// order.
func (s *Suite) Results() []Result {
	var out []Result
	for _, b := range s.blocks {
		out = append(out, s.runBlock(b.name, b.raw)...)
	}
	if s.skipUnknown {
		for i := range out {
			if out[i].Status == StatusUnknown {
				out[i].Status = StatusSkipped
			}
		}
	}
	return out
}

func (s *Suite) runBlock(name string, raw json.RawMessage) []Result {
	if name == "description" || strings.HasPrefix(name, "$") {
		return nil
	}
	if why, ok := notApplicable[name]; ok {
		return []Result{{Block: name, Status: StatusNotApplicable, Reason: why}}
	}
	switch name {
	case "cases":
		return s.runCases(raw)
	case "pulsar":
		return s.runPulsar(raw)
	case "roundtrip":
		return s.runRoundtrip(raw)
	case "data_shape":
		return s.runDataShape(raw)
	case "forbidden_keys":
		return s.runForbiddenKeys(raw)
	case "idempotency":
		return s.runIdempotency(raw)
	case "payload_schema", "payload_schema_unicode":
		return s.runPayloadSchema(name, raw)
	default:
		return []Result{{Block: name, Status: StatusUnknown, Reason: "block not understood by this runner"}}
	}
}

func (s *Suite) runPulsar(raw json.RawMessage) []Result {
	members, err := orderedObject(raw)
	if err != nil {
		return []Result{{Block: "pulsar", Status: StatusFail, Reason: err.Error()}}
	}
	var out []Result
	for _, m := range members {
		name := "pulsar." + m.name
		switch m.name {
		case "description":
		case "property_projection":
			out = append(out, s.runPropertyProjection(name, m.raw)...)
		case "attempts_reconciliation":
			out = append(out, s.runAttemptsReconciliation(name, m.raw)...)
		case "schema_version_gate":
			out = append(out, s.runSchemaVersionGate(name, m.raw)...)
		default:
			out = append(out, Result{Block: name, Status: StatusUnknown, Reason: "block not understood by this runner"})
		}
	}
	return out
}

// Summarize counts results.
func Summarize(results []Result) Summary {
	var sum Summary
	for _, r := range results {
		switch r.Status {
		case StatusPass:
			sum.Passed++
		case StatusFail, StatusUnknown:
			sum.Failed++
		case StatusNotApplicable:
			sum.NotApplicable++
		case StatusSkipped:
			sum.Skipped++
		}
	}
	return sum
}

// Report runs the suite and writes one line per block or case (PASS, FAIL with the reason,
// N/A with the reason, UNKNOWN, SKIP) and a final summary line to w. The returned summary
// is also what the line says; a write error is returned as is.
func (s *Suite) Report(w io.Writer) (Summary, error) {
	results := s.Results()
	for _, r := range results {
		line := fmt.Sprintf("%-7s %s", r.Status, r.Name())
		if r.Reason != "" {
			line += ": " + r.Reason
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return Summary{}, fmt.Errorf("conformance: write report: %w", err)
		}
	}
	sum := Summarize(results)
	if _, err := fmt.Fprintf(w, "conformance: %d passed, %d failed, %d not applicable, %d skipped\n",
		sum.Passed, sum.Failed, sum.NotApplicable, sum.Skipped); err != nil {
		return sum, fmt.Errorf("conformance: write report: %w", err)
	}
	return sum, nil
}

// Run runs the suite as Go subtests, one per block and case: failures fail the subtest,
// not-applicable and skipped blocks are reported with t.Skip and the reason.
func (s *Suite) Run(t *testing.T) {
	t.Helper()
	for _, r := range s.Results() {
		t.Run(r.Name(), func(t *testing.T) {
			switch r.Status {
			case StatusPass:
			case StatusNotApplicable, StatusSkipped:
				t.Skipf("%s: %s", r.Status, r.Reason)
			case StatusFail, StatusUnknown:
				t.Errorf("%s: %s", r.Status, r.Reason)
			}
		})
	}
}

// errCase builds a failure result from an error.
func errCase(blockName, caseName string, err error) Result {
	return Result{Block: blockName, Case: caseName, Status: StatusFail, Reason: err.Error()}
}

// pass builds a passing result.
func pass(blockName, caseName string) Result {
	return Result{Block: blockName, Case: caseName, Status: StatusPass}
}

// checkFields reports the first member of a case object that the runner does not know, so
// that a newer manifest with new expectations is never half-checked silently.
func checkFields(raw json.RawMessage, known ...string) error {
	members, err := orderedObject(raw)
	if err != nil {
		return err
	}
	allowed := map[string]bool{"name": true, "description": true, "reason": true}
	for _, k := range known {
		allowed[k] = true
	}
	for _, m := range members {
		if !allowed[m.name] {
			return fmt.Errorf("field %q not understood by this runner", m.name)
		}
	}
	return nil
}

// unknownCase builds the result of a case the runner does not fully understand.
func unknownCase(blockName, caseName string, err error) Result {
	return Result{Block: blockName, Case: caseName, Status: StatusUnknown, Reason: err.Error()}
}
