package pulsar

import (
	"errors"
	"fmt"
	"math"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
)

// The message properties of the BabelQueue Pulsar binding, each with its name in the
// comment. A plain message carries exactly the six properties PropJob … PropAttempts; a
// delayed one also carries PropDelay.
const (
	PropJob           = binding.Job           // "bq-job": the URN
	PropTraceID       = binding.TraceID       // "bq-trace-id": trace_id
	PropMessageID     = binding.MessageID     // "bq-message-id": meta.id
	PropSchemaVersion = binding.SchemaVersion // "bq-schema-version": "1"
	PropSourceLang    = binding.SourceLang    // "bq-source-lang": meta.lang
	PropAttempts      = binding.Attempts      // "bq-attempts": decimal attempts
	PropDelay         = binding.Delay         // "bq-delay": the delay in whole milliseconds, on delayed messages only
)

// maxAttemptsValue is the largest attempts count the binding represents (int32 max, the
// bound every BabelQueue SDK shares). Counts saturate here instead of wrapping.
const maxAttemptsValue = math.MaxInt32

// ErrSchemaVersion is the sentinel of a message whose bq-schema-version property is present,
// not blank and not exactly "1". [GateVerdict] returns it inside a *[SchemaVersionError].
var ErrSchemaVersion = errors.New("pulsar: unsupported bq-schema-version property")

// SchemaVersionError is returned by [GateVerdict] for a rejected bq-schema-version value.
// It matches [ErrSchemaVersion] with errors.Is.
type SchemaVersionError struct {
	// Value is the property value exactly as received (never trimmed).
	Value string
}

// Error implements error.
func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("pulsar: unsupported bq-schema-version property %q (want %q)", e.Value, "1")
}

// Unwrap returns [ErrSchemaVersion], which the error matches.
func (*SchemaVersionError) Unwrap() error { return ErrSchemaVersion }

// ProjectProperties returns the six bq-* properties of env: the URN, the
// trace id, meta.id, the schema version, meta.lang and attempts, all as strings. The map is
// new on every call, so callers may add to it.
func ProjectProperties(env *envelope.Envelope) map[string]string {
	props := make(map[string]string, 6)
	binding.Project(props, env)
	return props
}

// parseAttempts parses a bq-attempts property value. It is valid only when it is made of
// ASCII digits alone (at least one; leading zeros allowed) and its value is at most
// 2147483647 (int32 max, the bound every BabelQueue SDK shares). "+3", "-1", " 3", "3 ", "" and non-ASCII digits are invalid, which is
// why strconv.Atoi alone is not used.
func parseAttempts(value string) (int, bool) {
	if value == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
		if n > maxAttemptsValue {
			return 0, false
		}
	}
	return n, true
}

// GateVerdict applies the schema-version gate (ADR-0037) to the
// bq-schema-version property: absent or blank ([envelope.IsBlank]) goes on, and so does
// exactly "1"; every other value, compared without trimming or parsing, is rejected with a
// *[SchemaVersionError] before the payload is looked at.
func GateVerdict(value string, present bool) error {
	if !present || envelope.IsBlank(value) || value == "1" {
		return nil
	}
	return &SchemaVersionError{Value: value}
}

// Reconcile computes the attempts of a delivery. The base is the
// bq-attempts property when present and valid (parsed strictly: ASCII digits only, at most 2147483647), otherwise bodyAttempts
// (pass 0 for a poison body); negative values count as 0. reconciled is the larger of the
// base and Pulsar's 0-based redelivery count (no −1), and counted = reconciled + 1 is this
// delivery's number, both saturating at 2147483647 (int32 max).
func Reconcile(property string, present bool, bodyAttempts int, redeliveryCount uint32) (reconciled, counted int) {
	base := max(bodyAttempts, 0)
	if present {
		if v, ok := parseAttempts(property); ok {
			base = v
		}
	}
	reconciled = min(max(base, int(min(redeliveryCount, maxAttemptsValue))), maxAttemptsValue)
	counted = reconciled
	if counted < maxAttemptsValue {
		counted++
	}
	return reconciled, counted
}
