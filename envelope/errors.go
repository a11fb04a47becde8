package envelope

import "errors"

// ErrPoison is matched (errors.Is) by every *[PoisonError] that [Decode] and [Classify]
// return: the body is unacceptable and must be dead-lettered, never handled.
var ErrPoison = errors.New("envelope: poison")

// ErrInvalidURN is returned by [Make] when the URN is blank or not valid UTF-8.
var ErrInvalidURN = errors.New("envelope: invalid urn")

// ErrInvalidData is returned by [Make], [Envelope.Encode] and [Envelope.AppendEncode] when
// the data is not a JSON object (an array, a scalar, malformed JSON, invalid UTF-8) or cannot
// be marshalled (NaN, ±Inf, channels, …).
var ErrInvalidData = errors.New("envelope: invalid data")

// ErrInvalidOption is returned by [Make] when an option has an invalid value (a blank trace
// or message id, a queue name that is not valid UTF-8, a nil option).
var ErrInvalidOption = errors.New("envelope: invalid option")

// ErrInvalidReason is returned by [PoisonCopy] when [DeadLetterInfo].Reason is set to
// something other than [ReasonPoison].
var ErrInvalidReason = errors.New("envelope: invalid dead-letter reason")

// ErrLimitTooSmall is returned by [TruncatedCopy] and the copies built on it when the limit
// cannot hold even the dead-letter block and the truncation marker (a few hundred bytes).
var ErrLimitTooSmall = errors.New("envelope: dead-letter limit too small")

// Rule names the acceptance rule (see the package doc) that a poison body failed.
type Rule string

// The acceptance rules, in the order [Classify] checks them.
const (
	RuleUTF8          Rule = "utf8"           // rule 1: the payload is not valid UTF-8
	RuleSingleObject  Rule = "single_object"  // rule 2: not exactly one JSON object (malformed JSON, BOM, trailing bytes, array, …)
	RuleType          Rule = "type"           // rule 4: a known member has the wrong JSON type
	RuleMembers       Rule = "members"        // the frame, meta or dead_letter has more than MaxMembers members
	RuleURN           Rule = "urn"            // rule 5: the resolved URN is blank
	RuleSchemaVersion Rule = "schema_version" // rule 6: meta.schema_version is missing or not 1
	RuleData          Rule = "data"           // rule 6: data is missing
	RuleTraceID       Rule = "trace_id"       // rule 6: trace_id is missing or blank
)

// PoisonError is returned by [Decode] and [Classify] for an unacceptable body. It names the
// failed rule and, when known, the JSON pointer (RFC 6901) of the offending member.
type PoisonError struct {
	Rule    Rule
	Pointer string // e.g. "/meta/schema_version"; "" when the failure is not tied to a member
	Detail  string // human-readable; includes the byte offset for malformed JSON
}

// Error returns "envelope: poison (rule): detail".
func (e *PoisonError) Error() string {
	return "envelope: poison (" + string(e.Rule) + "): " + e.Detail
}

// Is reports whether target is [ErrPoison].
func (*PoisonError) Is(target error) bool {
	return target == ErrPoison
}

func poison(rule Rule, pointer, detail string) *PoisonError {
	return &PoisonError{Rule: rule, Pointer: pointer, Detail: detail}
}
