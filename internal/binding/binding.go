// Package binding is the one place of the BabelQueue Pulsar binding's message properties:
// their names, the projection of an envelope onto them, and the rule by which bq-job
// routes a message. Package pulsar exports the names (pulsar.PropJob and the others) and
// applies them on publish and consume; package dlq, which package pulsar imports and which
// therefore cannot import it, reads and writes the same properties when it inspects and
// redrives dead-letter topics. Both go through this package, so the two cannot drift apart.
// Nothing here is for users of the SDK.
package binding

import (
	"strconv"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// The message properties of the binding. A plain message carries exactly the six from Job
// to Attempts; a delayed one also carries Delay.
const (
	Job           = "bq-job"            // the URN
	TraceID       = "bq-trace-id"       // trace_id
	MessageID     = "bq-message-id"     // meta.id
	SchemaVersion = "bq-schema-version" // meta.schema_version ("1")
	SourceLang    = "bq-source-lang"    // meta.lang
	Attempts      = "bq-attempts"       // attempts, in decimal
	Delay         = "bq-delay"          // the delay in whole milliseconds, on delayed messages only
)

// IsProperty reports whether k is one of the binding's properties, Job to Delay: the binding
// alone writes them, so a publish's headers and a failed delivery's copy properties never
// replace them.
func IsProperty(k string) bool {
	switch k {
	case Job, TraceID, MessageID, SchemaVersion, SourceLang, Attempts, Delay:
		return true
	default:
		return false
	}
}

// Project writes the six properties of env into props: the URN, the trace id, meta.id, the
// schema version, meta.lang and attempts (negative counted as 0), all as strings.
func Project(props map[string]string, env *envelope.Envelope) {
	props[Job] = env.URN()
	props[TraceID] = env.TraceID
	props[MessageID] = env.Meta.ID
	props[SchemaVersion] = strconv.Itoa(env.Meta.SchemaVersion)
	props[SourceLang] = env.Meta.Lang
	props[Attempts] = strconv.Itoa(max(env.Attempts, 0))
}

// RoutedJob returns the bq-job property of props when it is usable, present and not blank
// (envelope.IsBlank): a consumer then routes the message by it rather than by the body's
// URN, and the routing decision stays with the message's dead-letter copy and its redrive.
func RoutedJob(props map[string]string) (string, bool) {
	job, ok := props[Job]
	if !ok || envelope.IsBlank(job) {
		return "", false
	}
	return job, true
}
