package envelope

import (
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
	"unicode/utf8"
)

// Encode returns the canonical compact encoding of e (see "Canonical encoding" in the package doc). It fails, returning
// no bytes, only when Data is not a JSON object (wrapping [ErrInvalidData]).
func (e *Envelope) Encode() ([]byte, error) {
	out, err := e.AppendEncode(make([]byte, 0, e.sizeHint()))
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendEncode appends the canonical encoding of e to dst and returns the extended slice.
// On error dst is returned unchanged (nothing partial is appended).
//
// Member order: job, trace_id, data, meta (id, queue, lang, schema_version, created_at,
// unknown meta keys), attempts, dead_letter when present (reason, error, exception,
// failed_at, original_queue, attempts, lang, unknown keys), then the unknown top-level keys
// (the urn alias among them) in received order. Every known member is always written, with
// its zero value when it was absent ("queue":"" included); a blank job is written as the
// resolved URN. Forbidden keys are never written. Data and unknown members are written as
// their received text with insignificant whitespace removed.
func (e *Envelope) AppendEncode(dst []byte) ([]byte, error) {
	data, ws, err := checkData(e.Data)
	if err != nil {
		return dst, err
	}
	job := e.Job
	if IsBlank(job) {
		job = e.URN()
	}
	dst = append(dst, `{"job":`...)
	dst = appendString(dst, job)
	dst = append(dst, `,"trace_id":`...)
	dst = appendString(dst, e.TraceID)
	dst = append(dst, `,"data":`...)
	if ws {
		dst = appendCompact(dst, data)
	} else {
		dst = append(dst, data...)
	}
	m := &e.Meta
	dst = append(dst, `,"meta":{"id":`...)
	dst = appendString(dst, m.ID)
	dst = append(dst, `,"queue":`...)
	dst = appendString(dst, m.Queue)
	dst = append(dst, `,"lang":`...)
	dst = appendString(dst, m.Lang)
	dst = append(dst, `,"schema_version":`...)
	dst = strconv.AppendInt(dst, int64(m.SchemaVersion), 10)
	dst = append(dst, `,"created_at":`...)
	dst = strconv.AppendInt(dst, m.CreatedAt, 10)
	dst = append(dst, m.unknown...)
	dst = append(dst, `},"attempts":`...)
	dst = strconv.AppendInt(dst, int64(max(e.Attempts, 0)), 10)
	if e.DeadLetter != nil {
		dst = append(dst, `,"dead_letter":`...)
		dst = appendDeadLetter(dst, e.DeadLetter)
	}
	dst = append(dst, e.unknownMembers()...)
	return append(dst, '}'), nil
}

func appendDeadLetter(dst []byte, dl *DeadLetter) []byte {
	dst = append(dst, `{"reason":`...)
	dst = appendString(dst, string(dl.Reason))
	dst = append(dst, `,"error":`...)
	dst = appendNullableString(dst, dl.Error)
	dst = append(dst, `,"exception":`...)
	dst = appendNullableString(dst, dl.Exception)
	dst = append(dst, `,"failed_at":`...)
	dst = strconv.AppendInt(dst, dl.FailedAt, 10)
	dst = append(dst, `,"original_queue":`...)
	dst = appendString(dst, dl.OriginalQueue)
	dst = append(dst, `,"attempts":`...)
	dst = strconv.AppendInt(dst, int64(dl.Attempts), 10)
	dst = append(dst, `,"lang":`...)
	dst = appendString(dst, dl.Lang)
	dst = append(dst, dl.unknown...)
	return append(dst, '}')
}

func appendNullableString(dst []byte, p *string) []byte {
	if p == nil {
		return append(dst, "null"...)
	}
	return appendString(dst, *p)
}

// checkData validates data as one JSON object and returns it without surrounding
// whitespace, and whether insignificant whitespace remains inside it. Empty data is {}.
func checkData(data []byte) (json.RawMessage, bool, error) {
	if len(data) == 0 {
		return emptyObject, false, nil
	}
	if !utf8.Valid(data) {
		return nil, false, dataError("not valid UTF-8")
	}
	i := skipWS(data, 0)
	end, ws, serr := scanValue(data, i, 1) // data sits at depth 1 inside the frame
	switch {
	case serr != nil:
		return nil, false, dataError("malformed JSON: " + serr.String())
	case data[i] != '{':
		return nil, false, dataError("a JSON " + kindOf(data[i]) + ", want an object")
	case skipWS(data, end) != len(data):
		return nil, false, dataError("trailing bytes after the object at byte " + strconv.Itoa(skipWS(data, end)))
	}
	return data[i:end], ws, nil
}

func dataError(detail string) error {
	return fmt.Errorf("%w: %s", ErrInvalidData, detail)
}

const hexDigits = "0123456789abcdef"

// strSafe reports the ASCII bytes written as themselves inside a JSON string.
var strSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString appends s as a canonical JSON string: no HTML escaping; '"' and '\\'
// escaped; control characters as \b \f \n \r \t or \u00xx (lower-case hex); U+2028 and
// U+2029 as \u2028 and \u2029; other non-ASCII as raw UTF-8; each invalid UTF-8 byte as
// \ufffd (as encoding/json does).
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip plain bytes eight at a time (the decoder's specialBytes flags exactly the
		// bytes strSafe does not list: controls, '"', '\\' and non-ASCII).
		if len(s)-i >= 8 {
			m := specialBytes(loadString64(s, i))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if strSafe[c] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func (e *Envelope) sizeHint() int {
	n := 160 + len(e.Job) + len(e.TraceID) + len(e.Data) +
		len(e.Meta.ID) + len(e.Meta.Queue) + len(e.Meta.Lang) +
		len(e.unknownMembers()) + len(e.Meta.unknown)
	if dl := e.DeadLetter; dl != nil {
		n += 128 + len(dl.Reason) + len(dl.OriginalQueue) + len(dl.Lang) + len(dl.unknown)
		if dl.Error != nil {
			n += len(*dl.Error)
		}
		if dl.Exception != nil {
			n += len(*dl.Exception)
		}
	}
	return n
}
