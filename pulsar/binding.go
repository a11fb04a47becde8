package pulsar

import (
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	engine "github.com/babelqueue/babelqueue-go-pulsar/pulsar/internal/engine"
)

// The message properties of the BabelQueue Pulsar binding. A plain message carries exactly
// the six properties PropJob … PropAttempts; a delayed one also carries PropDelay.
const (
	PropJob           = engine.PropJob           // the URN
	PropTraceID       = engine.PropTraceID       // trace_id
	PropMessageID     = engine.PropMessageID     // meta.id
	PropSchemaVersion = engine.PropSchemaVersion // "1"
	PropSourceLang    = engine.PropSourceLang    // meta.lang
	PropAttempts      = engine.PropAttempts      // decimal attempts
	PropDelay         = engine.PropDelay         // the delay in whole milliseconds, on delayed messages only
)

// MaxAttemptsValue is the largest attempts count the binding represents (int32 max, the
// bound every BabelQueue SDK shares). Counts saturate here instead of wrapping.
const MaxAttemptsValue = engine.MaxAttemptsValue

// ErrSchemaVersion is the sentinel of a message whose bq-schema-version property is present,
// not blank and not exactly "1". [GateVerdict] returns it inside a *[SchemaVersionError].
var ErrSchemaVersion = engine.ErrSchemaVersion

// SchemaVersionError is returned by [GateVerdict] for a rejected bq-schema-version value
// (its Value field holds the property exactly as received, never trimmed). It matches
// [ErrSchemaVersion] with errors.Is.
type SchemaVersionError = engine.SchemaVersionError

// ProjectProperties returns the six bq-* properties of env: the URN, the
// trace id, meta.id, the schema version, meta.lang and attempts, all as strings. The map is
// new on every call, so callers may add to it.
func ProjectProperties(env *envelope.Envelope) map[string]string {
	return engine.ProjectProperties(env)
}

// ParseAttempts parses a bq-attempts property value. It is valid only when it is made of
// ASCII digits alone (at least one; leading zeros allowed) and its value is at most
// [MaxAttemptsValue]. "+3", "-1", " 3", "3 ", "" and non-ASCII digits are invalid, which is
// why strconv.Atoi alone is not used.
func ParseAttempts(value string) (int, bool) {
	return engine.ParseAttempts(value)
}

// GateVerdict applies the schema-version gate (ADR-0037) to the
// bq-schema-version property: absent or blank ([envelope.IsBlank]) goes on, and so does
// exactly "1"; every other value, compared without trimming or parsing, is rejected with a
// *[SchemaVersionError] before the payload is looked at.
func GateVerdict(value string, present bool) error {
	return engine.GateVerdict(value, present)
}

// Reconcile computes the attempts of a delivery. The base is the
// bq-attempts property when present and valid ([ParseAttempts]), otherwise bodyAttempts
// (pass 0 for a poison body); negative values count as 0. reconciled is the larger of the
// base and Pulsar's 0-based redelivery count (no −1), and counted = reconciled + 1 is this
// delivery's number, both saturating at [MaxAttemptsValue].
func Reconcile(property string, present bool, bodyAttempts int, redeliveryCount uint32) (reconciled, counted int) {
	return engine.Reconcile(property, present, bodyAttempts, redeliveryCount)
}
