package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/schema"
)

// runIdempotency runs the idempotency block through the consumer middleware of an
// [idempotency.Guard] on an [idempotency.MemoryStore]: dedup_key checks the key is the
// fixture's meta.id (not its trace_id); every case of sequences replays its deliveries
// through one guarded handler.
func (s *Suite) runIdempotency(raw json.RawMessage) []Result {
	members, err := orderedObject(raw)
	if err != nil {
		return []Result{errCase("idempotency", "", err)}
	}
	var out []Result
	for _, m := range members {
		name := "idempotency." + m.name
		switch m.name {
		case "description":
		case "dedup_key":
			out = append(out, s.runDedupKey(name, m.raw))
		case "sequences":
			out = append(out, forEachCase(name, m.raw, []string{"deliveries", "expected_effects"},
				func(_ string, c json.RawMessage) error { return runSequence(c) })...)
		default:
			out = append(out, Result{Block: name, Status: StatusUnknown, Reason: "block not understood by this runner"})
		}
	}
	return out
}

// guarded is a handler behind the idempotency middleware, counting its runs.
type guarded struct {
	guard *idempotency.Guard
	h     bqpulsar.HandlerFunc
	runs  int
	fail  bool // the next run fails
}

var errConformanceThrow = errors.New("conformance: the handler throws")

func newGuarded() (*guarded, error) {
	store, err := idempotency.NewMemoryStore()
	if err != nil {
		return nil, err
	}
	g, err := idempotency.New(store)
	if err != nil {
		return nil, err
	}
	gh := &guarded{guard: g}
	gh.h = g.Middleware()(func(context.Context, *envelope.Envelope, apulsar.Message) error {
		gh.runs++
		if gh.fail {
			return errConformanceThrow
		}
		return nil
	})
	return gh, nil
}

// deliver runs one delivery and says whether the handler ran, and the outcome.
func (gh *guarded) deliver(env *envelope.Envelope, fail bool) (ran bool, err error) {
	before := gh.runs
	gh.fail = fail
	err = gh.h(context.Background(), env, nil)
	return gh.runs > before, err
}

func (s *Suite) runDedupKey(blockName string, raw json.RawMessage) Result {
	if err := checkFields(raw, "envelope_file", "key_field", "expected_key"); err != nil {
		return unknownCase(blockName, "", err)
	}
	var b struct {
		File     string `json:"envelope_file"`
		KeyField string `json:"key_field"`
		Expected string `json:"expected_key"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return errCase(blockName, "", err)
	}
	if b.KeyField != "meta.id" {
		return errCase(blockName, b.File, fmt.Errorf("key_field %q, this SDK keys on meta.id", b.KeyField))
	}
	payload, err := s.readFixture(b.File)
	if err != nil {
		return errCase(blockName, b.File, err)
	}
	env, err := envelope.Classify(payload)
	if err != nil {
		return errCase(blockName, b.File, fmt.Errorf("fixture rejected: %w", err))
	}
	if env.Meta.ID != b.Expected {
		return errCase(blockName, b.File, fmt.Errorf("meta.id %q, want %q", env.Meta.ID, b.Expected))
	}
	gh, err := newGuarded()
	if err != nil {
		return errCase(blockName, b.File, err)
	}
	// The same bytes twice are one message; the same trace_id with another meta.id is not.
	again, err := envelope.Classify(payload)
	if err != nil {
		return errCase(blockName, b.File, err)
	}
	sibling := env.Clone()
	sibling.Meta.ID = b.Expected + "-sibling"
	for i, d := range []struct {
		env  *envelope.Envelope
		runs bool
	}{{env, true}, {again, false}, {sibling, true}} {
		ran, err := gh.deliver(d.env, false)
		if err != nil {
			return errCase(blockName, b.File, fmt.Errorf("delivery %d: %w", i+1, err))
		}
		if ran != d.runs {
			return errCase(blockName, b.File, fmt.Errorf("delivery %d: handler ran = %v, want %v", i+1, ran, d.runs))
		}
	}
	return pass(blockName, b.File)
}

func runSequence(raw json.RawMessage) error {
	var c struct {
		Deliveries []json.RawMessage `json:"deliveries"`
		Expected   *int              `json:"expected_effects"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("read case: %w", err)
	}
	if c.Expected == nil || len(c.Deliveries) == 0 {
		return errors.New("case needs deliveries and expected_effects")
	}
	gh, err := newGuarded()
	if err != nil {
		return err
	}
	effects := 0
	for i, rawD := range c.Deliveries {
		if err := checkFields(rawD, "meta_id", "expect_effect", "outcome", "forget_before"); err != nil {
			return fmt.Errorf("delivery %d: %w", i+1, err)
		}
		var d struct {
			ID     *string `json:"meta_id"`
			Effect string  `json:"expect_effect"`
			Out    string  `json:"outcome"`
			Forget bool    `json:"forget_before"`
		}
		if err := json.Unmarshal(rawD, &d); err != nil {
			return fmt.Errorf("delivery %d: %w", i+1, err)
		}
		if d.ID == nil {
			return fmt.Errorf("delivery %d has no meta_id", i+1)
		}
		if d.Forget {
			if err := gh.guard.Forget(context.Background(), *d.ID); err != nil {
				return fmt.Errorf("delivery %d: forget: %w", i+1, err)
			}
		}
		fail := false
		switch d.Out {
		case "", "ok":
		case "throw":
			fail = true
		default:
			return fmt.Errorf("delivery %d: outcome %q not understood by this runner", i+1, d.Out)
		}
		env := &envelope.Envelope{
			Job: "urn:babel:conformance:idempotency", TraceID: "trace-shared",
			Meta: envelope.Meta{ID: *d.ID, SchemaVersion: envelope.SchemaVersion},
		}
		ran, err := gh.deliver(env, fail)
		switch d.Effect {
		case "run":
			if !ran {
				return fmt.Errorf("delivery %d (%q): skipped, want run", i+1, *d.ID)
			}
			if fail != (err != nil) {
				return fmt.Errorf("delivery %d (%q): outcome %s, want %s", i+1, *d.ID, errText(err), d.Out)
			}
			effects++ // the manifest counts every run of the handler, failed ones included
		case "skip":
			if ran {
				return fmt.Errorf("delivery %d (%q): the handler ran, want skip", i+1, *d.ID)
			}
			if err != nil {
				return fmt.Errorf("delivery %d (%q): skipped but not acknowledged: %w", i+1, *d.ID, err)
			}
		default:
			return fmt.Errorf("delivery %d: expect_effect %q not understood by this runner", i+1, d.Effect)
		}
	}
	if effects != *c.Expected {
		return fmt.Errorf("%d effects, want %d", effects, *c.Expected)
	}
	return nil
}

// runPayloadSchema compiles the block's schema with [schema.Compile] and runs every case's
// data through the consumer middleware [schema.Middleware] and the publish-side check
// [schema.Check]: a valid case must reach the handler and pass the check; an invalid one
// must be dead-lettered (the handler not run) and refused with a [schema.ValidationError].
func (*Suite) runPayloadSchema(blockName string, raw json.RawMessage) []Result {
	var b struct {
		Schema json.RawMessage `json:"schema"`
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return []Result{errCase(blockName, "", err)}
	}
	members, err := orderedObject(raw)
	if err != nil {
		return []Result{errCase(blockName, "", err)}
	}
	for _, m := range members {
		switch m.name {
		case "description", "schema", "cases":
		default:
			return []Result{unknownCase(blockName, "", fmt.Errorf("field %q not understood by this runner", m.name))}
		}
	}
	const urn = "urn:babel:conformance:payload"
	if len(b.Schema) == 0 {
		return []Result{errCase(blockName, "", errors.New(`block has no "schema"`))}
	}
	provider, err := schema.NewMapProvider(map[string][]byte{urn: b.Schema})
	if err != nil {
		return []Result{errCase(blockName, "", err)}
	}
	ran := false
	h := schema.Middleware(provider)(func(context.Context, *envelope.Envelope, apulsar.Message) error {
		ran = true
		return nil
	})
	return forEachCase(blockName, raw, []string{"valid", "data"}, func(_ string, raw json.RawMessage) error {
		var c struct {
			Valid *bool           `json:"valid"`
			Data  json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return fmt.Errorf("read case: %w", err)
		}
		if c.Valid == nil || len(c.Data) == 0 {
			return errors.New(`case needs "valid" and "data"`)
		}
		env := &envelope.Envelope{Job: urn, Data: c.Data, Meta: envelope.Meta{ID: "conformance"}}
		ran = false
		outcome := h(context.Background(), env, nil)
		checked := schema.Check(provider, urn, c.Data)
		if *c.Valid {
			switch {
			case outcome != nil:
				return fmt.Errorf("valid data refused by the consumer middleware: %w", outcome)
			case !ran:
				return errors.New("valid data did not reach the handler")
			case checked != nil:
				return fmt.Errorf("valid data refused by the publish check: %w", checked)
			}
			return nil
		}
		var dl *bqpulsar.DeadLetterError
		var ve *schema.ValidationError
		switch {
		case ran:
			return errors.New("invalid data reached the handler")
		case !errors.As(outcome, &dl) || !errors.As(outcome, &ve):
			return fmt.Errorf("invalid data: consumer outcome %s, want a dead letter with a *schema.ValidationError", errText(outcome))
		case !errors.As(checked, &ve):
			return fmt.Errorf("invalid data: publish check %s, want a *schema.ValidationError", errText(checked))
		case len(ve.Violations) == 0:
			return errors.New("invalid data refused without a violation")
		}
		return nil
	})
}

// errText is err's text, or "nil".
func errText(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
