package envelope

import (
	"encoding/base64"
	"fmt"
	"time"
	"unicode/utf8"
)

// DeadLetterInfo describes why and when a message is dead-lettered, for
// [Envelope.ToDeadLetter] and [PoisonCopy].
type DeadLetterInfo struct {
	// Reason is dead_letter.reason. Zero: [ReasonFailed] for ToDeadLetter, [ReasonPoison]
	// for PoisonCopy (which accepts nothing else).
	Reason Reason
	// Cause gives dead_letter.error (err.Error()) and dead_letter.exception
	// (fmt.Sprintf("%T", err)). Nil writes both as JSON null.
	Cause error
	// Queue is the consumed queue name: dead_letter.original_queue when meta.queue is blank,
	// and always for PoisonCopy.
	Queue string
	// Attempts is the number of counted deliveries: dead_letter.attempts, and the top-level
	// attempts of a ToDeadLetter copy. Negative clamps to 0.
	Attempts int
	// FailedAt is dead_letter.failed_at, written as Unix milliseconds. Zero: time.Now().
	FailedAt time.Time
}

func (info *DeadLetterInfo) block(reason Reason, queue string) *DeadLetter {
	at := info.FailedAt
	if at.IsZero() {
		at = time.Now()
	}
	dl := &DeadLetter{
		Reason:        reason,
		FailedAt:      at.UnixMilli(),
		OriginalQueue: queue,
		Attempts:      max(info.Attempts, 0),
		Lang:          Lang,
	}
	if info.Cause != nil {
		msg := info.Cause.Error()
		typ := fmt.Sprintf("%T", info.Cause)
		dl.Error, dl.Exception = &msg, &typ
	}
	return dl
}

// ToDeadLetter returns the dead-letter copy of an acceptable message: a
// deep copy of e with top-level attempts = info.Attempts and a new dead_letter block
// (replacing any earlier one) with lang "go". Data, unknown keys and the urn alias are kept
// as received; forbidden keys stay dropped.
// [Envelope.DeadLetterWithin] encodes it within a size limit.
func (e *Envelope) ToDeadLetter(info DeadLetterInfo) *Envelope {
	reason := info.Reason
	if reason == "" {
		reason = ReasonFailed
	}
	queue := e.Meta.Queue
	if IsBlank(queue) {
		queue = info.Queue
	}
	c := e.Clone()
	c.Attempts = max(info.Attempts, 0)
	c.DeadLetter = info.block(reason, queue)
	return c
}

// PoisonCopy returns the dead-letter copy of an unacceptable body (ADR-0035):
//
//	{"raw":"<payload as a JSON string>","raw_base64":"<exact bytes>","dead_letter":{…}}
//
// raw holds the payload as text, each invalid UTF-8 byte replaced by U+FFFD; raw_base64
// (standard encoding, padded) is present only when the payload is not valid UTF-8, so the
// exact bytes are never lost. dead_letter.reason is "poison" and original_queue is
// info.Queue. It fails, wrapping [ErrInvalidReason], when info.Reason is set to another
// reason.
//
// The copy can be several times larger than payload (a NUL is written as 6 bytes), so it
// may exceed the broker's message size limit; [PoisonCopyWithin] bounds it.
func PoisonCopy(payload []byte, info DeadLetterInfo) ([]byte, error) {
	if info.Reason != "" && info.Reason != ReasonPoison {
		return nil, fmt.Errorf("%w: a poison copy has reason %q, got %q", ErrInvalidReason, ReasonPoison, info.Reason)
	}
	return poisonCopy(payload, info.block(ReasonPoison, info.Queue)), nil
}

// poisonCopy writes the poison copy of payload with the block dl.
func poisonCopy(payload []byte, dl *DeadLetter) []byte {
	valid := utf8.Valid(payload)
	n := len(payload) + len(payload)/8 + 256
	if !valid {
		n += base64.StdEncoding.EncodedLen(len(payload)) + len(payload)*5
	}
	out := make([]byte, 0, n)
	out = append(out, `{"raw":`...)
	out = appendString(out, string(payload))
	if !valid {
		out = append(out, `,"raw_base64":"`...)
		out = base64.StdEncoding.AppendEncode(out, payload)
		out = append(out, '"')
	}
	out = append(out, `,"dead_letter":`...)
	out = appendDeadLetter(out, dl)
	return append(out, '}')
}
