package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// SchemaVersion is the envelope schema version this package produces and accepts.
const SchemaVersion = 1

// Lang is the producer language tag this SDK writes in meta.lang and dead_letter.lang.
const Lang = "go"

// Reason says why a message was dead-lettered (dead_letter.reason).
type Reason string

// The dead-letter reasons a dead_letter block records.
const (
	ReasonFailed     Reason = "failed"      // the handler returned an error until retries were exhausted
	ReasonUnknownURN Reason = "unknown_urn" // no handler is registered for the URN
	ReasonPoison     Reason = "poison"      // the body is unacceptable (see [Classify])
)

// Meta is the producer-set descriptive block of an envelope.
type Meta struct {
	ID            string // meta.id, the idempotency key (a UUID v4 from BabelQueue producers)
	Queue         string // meta.queue, the logical queue name ("" when absent)
	Lang          string // meta.lang, the producer language (any value is accepted and kept)
	SchemaVersion int    // meta.schema_version
	CreatedAt     int64  // meta.created_at, Unix milliseconds UTC

	unknown string // unknown meta members as `,<key>:<value>`…, verbatim, in received order
}

// DeadLetter is the dead_letter block of a dead-lettered message.
type DeadLetter struct {
	Reason        Reason
	Error         *string // nil = JSON null or absent
	Exception     *string // nil = JSON null or absent
	FailedAt      int64   // Unix milliseconds
	OriginalQueue string
	Attempts      int
	Lang          string

	unknown string // unknown dead_letter members as `,<key>:<value>`…, verbatim, in received order
}

// Envelope is one BabelQueue message (schema_version 1). Values come from [Make] or
// [Decode]; the With… methods and [Envelope.ToDeadLetter] return modified copies.
//
// An Envelope owns all its memory: nothing aliases the payload given to [Decode].
type Envelope struct {
	Job        string          // the job member as received ("" when absent); see [Envelope.URN]
	TraceID    string          // trace_id
	Data       json.RawMessage // the JSON text of data: compact, otherwise exactly as received
	Meta       Meta
	Attempts   int         // top-level retry counter, >= 0 after Decode
	DeadLetter *DeadLetter // nil when absent

	// rare holds what few decoded envelopes have, nil for all others: one pointer keeps
	// the Envelope, which shares one allocation with the text it keeps, small (a smaller
	// size class for that allocation). It is never changed after Decode returns, so
	// copies share it.
	rare *rareParts
}

// rareParts are the parts of a decoded envelope that most envelopes lack.
type rareParts struct {
	urn      string    // the inbound urn alias, decoded (also kept verbatim among unknown)
	unknown  string    // unknown top-level members (and urn) as `,<key>:<value>`…, in received order
	warnings []Warning // the forbidden keys seen by Decode, each pointer once
}

// urnAlias returns the inbound urn alias as decoded, "" when absent.
func (e *Envelope) urnAlias() string {
	if e.rare == nil {
		return ""
	}
	return e.rare.urn
}

// unknownMembers returns the unknown top-level members as `,<key>:<value>`…, "" when none.
func (e *Envelope) unknownMembers() string {
	if e.rare == nil {
		return ""
	}
	return e.rare.unknown
}

// Warning reports a forbidden key that [Decode] accepted and that [Envelope.Encode] drops.
type Warning struct {
	Pointer string // RFC 6901 pointer of the key, e.g. "/meta/ts"
	Message string
}

var emptyObject = []byte("{}")

// URN returns the resolved URN: Job with blank removed at both ends, or, when that is
// empty, the inbound urn alias treated the same way. "" means the message has no identity
// (rule 5).
func (e *Envelope) URN() string {
	if j := trimBlank(e.Job); j != "" {
		return j
	}
	return trimBlank(e.urnAlias())
}

// Bind decodes Data into v with encoding/json. Numbers decoded into an interface value
// become [json.Number], so 9007199254740993 stays exact; absent data binds as {}.
func (e *Envelope) Bind(v any) error {
	data := []byte(e.Data)
	if len(data) == 0 {
		data = emptyObject
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("envelope: bind data: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("envelope: bind data: %w: trailing bytes after the object", ErrInvalidData)
	}
	return nil
}

// Warnings returns the forbidden keys Decode saw (each pointer once), or nil.
func (e *Envelope) Warnings() []Warning {
	if e.rare == nil || len(e.rare.warnings) == 0 {
		return nil
	}
	return append([]Warning(nil), e.rare.warnings...)
}

// Clone returns a deep copy of e: changing the copy's Data bytes or DeadLetter never
// changes e.
func (e *Envelope) Clone() *Envelope {
	c := *e
	if e.Data != nil {
		c.Data = append(json.RawMessage(nil), e.Data...)
	}
	if e.DeadLetter != nil {
		dl := *e.DeadLetter
		dl.Error = cloneStringPtr(dl.Error)
		dl.Exception = cloneStringPtr(dl.Exception)
		c.DeadLetter = &dl
	}
	return &c
}

// WithAttempts returns a copy of e whose attempts is n (n < 0 clamps to 0), for a retry
// republish. Everything else, unknown keys and the data text included, is unchanged.
func (e *Envelope) WithAttempts(n int) *Envelope {
	c := e.Clone()
	c.Attempts = max(n, 0)
	return c
}

// WithoutDeadLetter returns a copy of e without the dead_letter block, for a redrive.
func (e *Envelope) WithoutDeadLetter() *Envelope {
	c := e.Clone()
	c.DeadLetter = nil
	return c
}

// IsBlank reports whether s is empty or made only of the six ASCII blanks: space, TAB, LF,
// VT, FF and CR. Nothing else is blank (not NBSP, NEL, U+3000 nor the BOM).
func IsBlank(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isBlankByte(s[i]) {
			return false
		}
	}
	return true
}

func isBlankByte(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r') // \t \n \v \f \r
}

func trimBlank(s string) string {
	i, j := 0, len(s)
	for i < j && isBlankByte(s[i]) {
		i++
	}
	for j > i && isBlankByte(s[j-1]) {
		j--
	}
	return s[i:j]
}

func cloneStringPtr(p *string) *string {
	if p == nil {
		return nil
	}
	s := *p
	return &s
}
