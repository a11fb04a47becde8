package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
)

// caseList reads the "cases" array of a block (or the block itself when it is an array).
func caseList(raw json.RawMessage) ([]json.RawMessage, error) {
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var wrapper struct {
		Cases []json.RawMessage `json:"cases"`
	}
	if err := json.Unmarshal(raw, &wrapper); err != nil {
		return nil, fmt.Errorf("read cases: %w", err)
	}
	if wrapper.Cases == nil {
		return nil, errors.New("block has no cases")
	}
	return wrapper.Cases, nil
}

// caseName returns the case's "name", or #index when it has none.
func caseName(raw json.RawMessage, i int) string {
	var c struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(raw, &c) == nil && c.Name != "" {
		return c.Name
	}
	return "#" + strconv.Itoa(i+1)
}

// forEachCase runs fn on every case of a block, turning errors into failures.
func forEachCase(blockName string, raw json.RawMessage, known []string,
	fn func(name string, c json.RawMessage) error,
) []Result {
	list, err := caseList(raw)
	if err != nil {
		return []Result{errCase(blockName, "", err)}
	}
	out := make([]Result, 0, len(list))
	for i, c := range list {
		name := caseName(c, i)
		if err := checkFields(c, known...); err != nil {
			out = append(out, unknownCase(blockName, name, err))
			continue
		}
		if err := fn(name, c); err != nil {
			out = append(out, errCase(blockName, name, err))
			continue
		}
		out = append(out, pass(blockName, name))
	}
	return out
}

// runCases checks the decode verdict and the decoded values of every fixture.
//
// Extension understood by this runner: "expect_rule" on an invalid case names the
// [envelope.Rule] the rejection must report.
func (s *Suite) runCases(raw json.RawMessage) []Result {
	return forEachCase("cases", raw, []string{"file", "valid", "expect", "expect_rule"},
		func(_ string, raw json.RawMessage) error {
			var c struct {
				File       string                     `json:"file"`
				Valid      *bool                      `json:"valid"`
				Expect     map[string]json.RawMessage `json:"expect"`
				ExpectRule string                     `json:"expect_rule"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				return fmt.Errorf("read case: %w", err)
			}
			if c.Valid == nil {
				return errors.New(`case has no "valid"`)
			}
			payload, err := s.readFixture(c.File)
			if err != nil {
				return err
			}
			env, err := envelope.Classify(payload)
			if !*c.Valid {
				if err == nil {
					return errors.New("accepted, but the case is invalid")
				}
				var pe *envelope.PoisonError
				if !errors.As(err, &pe) {
					return fmt.Errorf("rejected with %T (%w), want *envelope.PoisonError", err, err)
				}
				if c.ExpectRule != "" && string(pe.Rule) != c.ExpectRule {
					return fmt.Errorf("rejected by rule %q, want %q (%w)", pe.Rule, c.ExpectRule, err)
				}
				return nil
			}
			if err != nil {
				return fmt.Errorf("rejected, but the case is valid: %w", err)
			}
			return checkExpect(env, c.Expect)
		})
}

// checkExpect compares a decoded envelope with a case's "expect" object.
func checkExpect(env *envelope.Envelope, expect map[string]json.RawMessage) error {
	encoded, err := env.Encode()
	if err != nil {
		return fmt.Errorf("re-encode: %w", err)
	}
	reemitted, err := parseJSON(encoded)
	if err != nil {
		return fmt.Errorf("re-encoded envelope: %w", err)
	}
	for key, want := range expect {
		wantV, err := parseJSON(want)
		if err != nil {
			return fmt.Errorf("expect.%s: %w", key, err)
		}
		var got any
		switch key {
		case "urn":
			got = env.URN()
		case "data":
			if got, err = parseJSON(env.Data); err != nil {
				return fmt.Errorf("decoded data: %w", err)
			}
		case "attempts":
			got = json.Number(strconv.Itoa(env.Attempts))
		case "lang":
			got = env.Meta.Lang
		case "schema_version":
			got = json.Number(strconv.Itoa(env.Meta.SchemaVersion))
		case "dead_letter":
			if env.DeadLetter == nil {
				return errors.New("no dead_letter block decoded")
			}
			wantBlock, ok := wantV.(map[string]any)
			if !ok {
				return errors.New("expect.dead_letter is not an object")
			}
			for k, v := range wantBlock {
				g, ok := lookup(reemitted, "/dead_letter/"+k)
				if !ok || !deepEqual(g, v) {
					return fmt.Errorf("dead_letter.%s = %s, want %s", k, describe(g), describe(v))
				}
			}
			continue
		default:
			return fmt.Errorf("expect.%s not understood by this runner", key)
		}
		if !deepEqual(got, wantV) {
			return fmt.Errorf("%s = %s, want %s", key, describe(got), describe(wantV))
		}
	}
	return nil
}

// runPropertyProjection compares the projected bq-* properties of a fixture with the
// expected map, key count included.
func (s *Suite) runPropertyProjection(blockName string, raw json.RawMessage) []Result {
	if err := checkFields(raw, "envelope_file", "properties"); err != nil {
		return []Result{unknownCase(blockName, "", err)}
	}
	var b struct {
		File  string            `json:"envelope_file"`
		Props map[string]string `json:"properties"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return []Result{errCase(blockName, "", err)}
	}
	name := b.File
	payload, err := s.readFixture(b.File)
	if err != nil {
		return []Result{errCase(blockName, name, err)}
	}
	env, err := envelope.Classify(payload)
	if err != nil {
		return []Result{errCase(blockName, name, fmt.Errorf("fixture rejected: %w", err))}
	}
	got := bqpulsar.ProjectProperties(env)
	if len(got) != len(b.Props) {
		return []Result{errCase(blockName, name, fmt.Errorf("projected %d properties %v, want %d %v",
			len(got), got, len(b.Props), b.Props))}
	}
	for k, want := range b.Props {
		if g, ok := got[k]; !ok || g != want {
			return []Result{errCase(blockName, name, fmt.Errorf("property %s = %q (present %v), want %q", k, g, ok, want))}
		}
	}
	return []Result{pass(blockName, name)}
}

// runAttemptsReconciliation runs every case through [bqpulsar.Reconcile], the function the
// consumer uses.
//
// Extension understood by this runner: "attempts_property" (a string) is passed as a
// present bq-attempts property; "expected_counted" checks the counted delivery number.
func (*Suite) runAttemptsReconciliation(blockName string, raw json.RawMessage) []Result {
	return forEachCase(blockName, raw,
		[]string{"body_attempts", "redelivery_count", "expected_attempts", "attempts_property", "expected_counted"},
		func(_ string, raw json.RawMessage) error {
			var c struct {
				Body     *int    `json:"body_attempts"`
				RC       *uint32 `json:"redelivery_count"`
				Expected *int    `json:"expected_attempts"`
				Prop     *string `json:"attempts_property"`
				Counted  *int    `json:"expected_counted"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				return fmt.Errorf("read case: %w", err)
			}
			if c.Body == nil || c.RC == nil || c.Expected == nil {
				return errors.New("case needs body_attempts, redelivery_count and expected_attempts")
			}
			prop := ""
			if c.Prop != nil {
				prop = *c.Prop
			}
			reconciled, counted := bqpulsar.Reconcile(prop, c.Prop != nil, *c.Body, *c.RC)
			if reconciled != *c.Expected {
				return fmt.Errorf("reconciled %d, want %d", reconciled, *c.Expected)
			}
			if c.Counted != nil && counted != *c.Counted {
				return fmt.Errorf("counted %d, want %d", counted, *c.Counted)
			}
			return nil
		})
}

// runSchemaVersionGate runs every case through [bqpulsar.GateVerdict], the consumer's
// gate; a "decode" verdict also requires the block's fixture to be accepted, as the
// consumer would go on to decode it.
func (s *Suite) runSchemaVersionGate(blockName string, raw json.RawMessage) []Result {
	var b struct {
		Property string `json:"property"`
		Fixture  string `json:"fixture"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return []Result{errCase(blockName, "", err)}
	}
	if b.Property != bqpulsar.PropSchemaVersion {
		return []Result{errCase(blockName, "", fmt.Errorf("gate property %q, this binding gates on %q",
			b.Property, bqpulsar.PropSchemaVersion))}
	}
	payload, fixtureErr := s.readFixture(b.Fixture)
	list, err := caseList(raw)
	if err != nil {
		return []Result{errCase(blockName, "", err)}
	}
	out := make([]Result, 0, len(list))
	for i, c := range list {
		var cs struct {
			Value  json.RawMessage `json:"value"`
			Absent bool            `json:"absent"`
			Expect string          `json:"expect"`
		}
		name := caseName(c, i)
		if err := json.Unmarshal(c, &cs); err != nil {
			out = append(out, errCase(blockName, name, err))
			continue
		}
		var value string
		present := !cs.Absent
		if present {
			if err := json.Unmarshal(cs.Value, &value); err != nil {
				out = append(out, unknownCase(blockName, name,
					fmt.Errorf("value %s is not a string; Pulsar properties are strings", cs.Value)))
				continue
			}
			name = fmt.Sprintf("%s value=%q", name, value)
		} else {
			name += " absent"
		}
		if err := checkFields(c, "value", "absent", "expect"); err != nil {
			out = append(out, unknownCase(blockName, name, err))
			continue
		}
		verdict := bqpulsar.GateVerdict(value, present)
		switch cs.Expect {
		case "decode":
			if verdict != nil {
				out = append(out, errCase(blockName, name, fmt.Errorf("rejected (%w), want decode", verdict)))
				continue
			}
			if fixtureErr != nil {
				out = append(out, errCase(blockName, name, fixtureErr))
				continue
			}
			if _, err := envelope.Classify(payload); err != nil {
				out = append(out, errCase(blockName, name, fmt.Errorf("gate passed but the fixture was rejected: %w", err)))
				continue
			}
		case "reject":
			if verdict == nil {
				out = append(out, errCase(blockName, name, errors.New("passed the gate, want reject")))
				continue
			}
		default:
			out = append(out, unknownCase(blockName, name, fmt.Errorf("expect %q not understood", cs.Expect)))
			continue
		}
		out = append(out, pass(blockName, name))
	}
	return out
}

// runRoundtrip decodes each fixture, increments attempts, re-encodes and checks the
// preserved members.
//
// Extension understood by this runner: "expect_preserved_text" maps a pointer to the exact
// JSON text (whitespace removed) the re-emitted member must have, for number spellings such
// as 9007199254740993 or 1.0 that a value comparison cannot tell apart.
func (s *Suite) runRoundtrip(raw json.RawMessage) []Result {
	return forEachCase("roundtrip", raw,
		[]string{"file", "expect_attempts", "expect_preserved", "expect_preserved_text", "producer_schema_valid"},
		func(_ string, raw json.RawMessage) error {
			var c struct {
				File      string                     `json:"file"`
				Attempts  *int                       `json:"expect_attempts"`
				Preserved map[string]json.RawMessage `json:"expect_preserved"`
				Text      map[string]string          `json:"expect_preserved_text"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				return fmt.Errorf("read case: %w", err)
			}
			payload, err := s.readFixture(c.File)
			if err != nil {
				return err
			}
			env, err := envelope.Classify(payload)
			if err != nil {
				return fmt.Errorf("fixture rejected: %w", err)
			}
			out, err := env.WithAttempts(env.Attempts + 1).Encode()
			if err != nil {
				return fmt.Errorf("re-encode: %w", err)
			}
			doc, err := parseJSON(out)
			if err != nil {
				return fmt.Errorf("re-encoded output: %w", err)
			}
			if c.Attempts != nil {
				got, _ := lookup(doc, "/attempts")
				if !deepEqual(got, json.Number(strconv.Itoa(*c.Attempts))) {
					return fmt.Errorf("attempts = %s, want %d", describe(got), *c.Attempts)
				}
			}
			for ptr, want := range c.Preserved {
				wantV, err := parseJSON(want)
				if err != nil {
					return fmt.Errorf("expect_preserved %s: %w", ptr, err)
				}
				got, ok := lookup(doc, ptr)
				if !ok {
					return fmt.Errorf("%s missing after re-emit", ptr)
				}
				if !deepEqual(got, wantV) {
					return fmt.Errorf("%s = %s after re-emit, want %s", ptr, describe(got), describe(wantV))
				}
			}
			for ptr, want := range c.Text {
				got, ok := lookupRaw(out, ptr)
				if !ok {
					return fmt.Errorf("%s missing after re-emit", ptr)
				}
				if got != want {
					return fmt.Errorf("%s re-emitted as %s, want exactly %s", ptr, got, want)
				}
			}
			return nil
		})
}

// runDataShape checks that data is always an object: encode cases build an envelope with
// [envelope.Make] from a Go map, decode cases check the verdict of [envelope.Classify].
func (s *Suite) runDataShape(raw json.RawMessage) []Result {
	return forEachCase("data_shape", raw,
		[]string{"mode", "urn", "queue", "data", "expect_encoded_data_json", "file", "valid"},
		func(_ string, raw json.RawMessage) error {
			var c struct {
				Mode   string          `json:"mode"`
				URN    string          `json:"urn"`
				Queue  string          `json:"queue"`
				Data   json.RawMessage `json:"data"`
				Expect *string         `json:"expect_encoded_data_json"`
				File   string          `json:"file"`
				Valid  *bool           `json:"valid"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				return fmt.Errorf("read case: %w", err)
			}
			switch c.Mode {
			case "encode":
				return s.dataShapeEncode(c.URN, c.Queue, c.Data, c.Expect)
			case "decode":
				if c.Valid == nil {
					return errors.New(`decode case has no "valid"`)
				}
				payload, err := s.readFixture(c.File)
				if err != nil {
					return err
				}
				_, err = envelope.Classify(payload)
				if *c.Valid && err != nil {
					return fmt.Errorf("rejected, want accepted: %w", err)
				}
				if !*c.Valid && err == nil {
					return errors.New("accepted, want rejected")
				}
				return nil
			default:
				return fmt.Errorf("mode %q not understood", c.Mode)
			}
		})
}

func (*Suite) dataShapeEncode(urn, queue string, data json.RawMessage, expect *string) error {
	if expect == nil {
		return errors.New(`encode case has no "expect_encoded_data_json"`)
	}
	parsed, err := parseJSON(data)
	if err != nil {
		return fmt.Errorf("case data: %w", err)
	}
	var opts []envelope.MakeOption
	if queue != "" {
		opts = append(opts, envelope.WithQueue(queue))
	}
	env, err := envelope.Make(urn, parsed, opts...)
	if err != nil {
		return fmt.Errorf("make: %w", err)
	}
	out, err := env.Encode()
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	got, ok := lookupRaw(out, "/data")
	if !ok {
		return errors.New("encoded envelope has no data")
	}
	want, ok := lookupRaw([]byte(*expect), "")
	if !ok {
		return fmt.Errorf("expect_encoded_data_json %q is not JSON", *expect)
	}
	if got != want {
		return fmt.Errorf("data encoded as %s, want %s", got, want)
	}
	return nil
}

// runForbiddenKeys checks that a forbidden key decodes with a warning naming it and is gone
// after a re-encode.
func (s *Suite) runForbiddenKeys(raw json.RawMessage) []Result {
	return forEachCase("forbidden_keys", raw,
		[]string{"file", "forbidden_key", "expect", "expect_absent_after_reencode"},
		func(_ string, raw json.RawMessage) error {
			var c struct {
				File   string   `json:"file"`
				Key    string   `json:"forbidden_key"`
				Expect string   `json:"expect"`
				Absent []string `json:"expect_absent_after_reencode"`
			}
			if err := json.Unmarshal(raw, &c); err != nil {
				return fmt.Errorf("read case: %w", err)
			}
			if c.Expect != "warn" {
				return fmt.Errorf("expect %q not understood", c.Expect)
			}
			payload, err := s.readFixture(c.File)
			if err != nil {
				return err
			}
			env, err := envelope.Classify(payload)
			if err != nil {
				return fmt.Errorf("rejected, want accepted with a warning: %w", err)
			}
			warned := false
			for _, w := range env.Warnings() {
				if w.Pointer == c.Key {
					warned = true
				}
			}
			if !warned {
				return fmt.Errorf("no warning names %s (warnings: %v)", c.Key, env.Warnings())
			}
			out, err := env.Encode()
			if err != nil {
				return fmt.Errorf("re-encode: %w", err)
			}
			doc, err := parseJSON(out)
			if err != nil {
				return fmt.Errorf("re-encoded output: %w", err)
			}
			for _, ptr := range c.Absent {
				if _, present := lookup(doc, ptr); present {
					return fmt.Errorf("%s still present after re-encode", ptr)
				}
			}
			return nil
		})
}
