package envelope

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// TruncatedKeep is the most bytes of the original body a [TruncatedCopy] keeps in raw (fewer
// when the limit demands). 64 KiB identify a message to an operator; the whole body is
// identified by its size and SHA-256.
const TruncatedKeep = 64 << 10

// TruncatedCopy returns a dead-letter copy of the body payload that is at most limit bytes
// long, for a body whose full copy ([PoisonCopy], [Envelope.ToDeadLetter]) would be refused by
// the broker as too large:
//
//	{"raw":"<prefix as a JSON string>","raw_base64":"<prefix bytes>","truncated":true,
//	 "raw_size":<prefix bytes>,"original_size":<payload bytes>,
//	 "original_sha256":"<hex of SHA-256 of payload>","dead_letter":{…}}
//
// raw is the longest prefix of payload of at most [TruncatedKeep] bytes that fits, cut
// before a whole UTF-8 sequence (never inside one), written like the raw of a poison copy
// (each invalid UTF-8 byte as U+FFFD); raw_base64 (standard, padded) holds the same prefix
// exactly and is present only when that prefix is not valid UTF-8. raw_size is the length
// of the prefix in bytes, original_size and original_sha256 describe the whole payload.
// dead_letter is the block of [PoisonCopy]: reason is info.Reason ([ReasonPoison] when
// zero), original_queue is info.Queue; when the block alone would not leave room, its error
// text is cut (at a character boundary) to fit. The copy is valid JSON and never an
// acceptable envelope.
//
// It fails, wrapping [ErrLimitTooSmall], when limit cannot hold the copy with an empty raw
// and an empty error text.
func TruncatedCopy(payload []byte, info DeadLetterInfo, limit int) ([]byte, error) {
	reason := info.Reason
	if reason == "" {
		reason = ReasonPoison
	}
	return truncatedCopy(payload, info.block(reason, info.Queue), limit)
}

// PoisonCopyWithin returns [PoisonCopy] of payload when it is at most limit bytes long, and
// otherwise [TruncatedCopy] within limit. The errors are those of the two.
// The size of the full copy is computed first, so an oversized one is never built.
func PoisonCopyWithin(payload []byte, info DeadLetterInfo, limit int) ([]byte, error) {
	if info.Reason != "" && info.Reason != ReasonPoison {
		return PoisonCopy(payload, info) // the reason error
	}
	dl := info.block(ReasonPoison, info.Queue)
	if poisonCopySize(payload, dl) <= limit {
		return poisonCopy(payload, dl), nil
	}
	return truncatedCopy(payload, dl, limit)
}

// DeadLetterWithin returns the encoded dead-letter copy of e ([Envelope.ToDeadLetter] with
// info, then [Envelope.Encode]) when it is at most limit bytes long, and otherwise a
// [TruncatedCopy] of original within limit, with the block ToDeadLetter would write (reason
// [ReasonFailed] when zero, original_queue meta.queue when not blank, else info.Queue).
// original is the body as received; nil means the canonical encoding of e.
func (e *Envelope) DeadLetterWithin(original []byte, info DeadLetterInfo, limit int) ([]byte, error) {
	cp := e.ToDeadLetter(info)
	full, err := cp.Encode()
	if err != nil {
		return nil, err
	}
	if len(full) <= limit {
		return full, nil
	}
	if original == nil {
		if original, err = e.Encode(); err != nil {
			return nil, err
		}
	}
	return truncatedCopy(original, cp.DeadLetter, limit)
}

// FitDeadLetter returns full (a dead-letter copy) when it is at most limit bytes long, and otherwise a
// [TruncatedCopy] of original with info ([ReasonPoison] when info.Reason is zero). It is
// for callers that built the full copy themselves.
func FitDeadLetter(full, original []byte, info DeadLetterInfo, limit int) ([]byte, error) {
	if len(full) <= limit {
		return full, nil
	}
	return TruncatedCopy(original, info, limit)
}

// truncatedCopy builds the copy of TruncatedCopy around a ready block.
func truncatedCopy(payload []byte, dl *DeadLetter, limit int) ([]byte, error) {
	maxKeep := min(len(payload), TruncatedKeep)
	sum := sha256.Sum256(payload)
	tail := make([]byte, 0, 160)
	tail = append(tail, `,"original_size":`...)
	tail = strconv.AppendInt(tail, int64(len(payload)), 10)
	tail = append(tail, `,"original_sha256":"`...)
	tail = hex.AppendEncode(tail, sum[:])
	tail = append(tail, `","dead_letter":`...)

	const head = `{"raw":"","truncated":true,"raw_size":`
	// The fixed part: everything but the raw text, raw_base64 and the error text.
	fixed := len(head) + len(strconv.Itoa(maxKeep)) + len(tail) + 1 // the closing brace
	noError := *dl
	if dl.Error != nil {
		empty := ""
		noError.Error = &empty
	}
	block := appendDeadLetter(nil, &noError)
	if fixed+len(block) > limit {
		return nil, fmt.Errorf("%w: %d bytes, the block and marker need %d", ErrLimitTooSmall, limit, fixed+len(block))
	}
	if dl.Error != nil {
		// Keep the whole error text when it fits with the marker, else the longest prefix.
		room := limit - fixed - len(block)
		n, _ := fitString(*dl.Error, room, false)
		msg := (*dl.Error)[:n]
		noError.Error = &msg
		block = appendDeadLetter(nil, &noError)
	}
	room := limit - fixed - len(block)
	keep, withBase64 := fitString(string(payload[:maxKeep]), room, true)

	out := make([]byte, 0, limit)
	out = append(out, `{"raw":`...)
	out = appendString(out, string(payload[:keep]))
	if withBase64 {
		out = append(out, `,"raw_base64":"`...)
		out = base64.StdEncoding.AppendEncode(out, payload[:keep])
		out = append(out, '"')
	}
	out = append(out, `,"truncated":true,"raw_size":`...)
	out = strconv.AppendInt(out, int64(keep), 10)
	out = append(out, tail...)
	out = append(out, block...)
	return append(out, '}'), nil
}

// base64Member is the text raw_base64 adds besides its encoded bytes.
const base64Member = len(`,"raw_base64":""`)

// fitString returns the length n of the longest prefix of s, cut before a UTF-8 sequence
// or an invalid byte, whose appendString encoding adds at most room bytes beyond the quotes
// already counted. With base64 set, the prefix is also written as raw_base64 when it is not
// valid UTF-8, and that text is counted too; withBase64 reports whether it is needed.
func fitString(s string, room int, base64Counted bool) (n int, withBase64 bool) {
	used, invalid := 0, false
	for i := 0; i < len(s); {
		size, enc, bad := escapedUnit(s, i)
		used += enc
		inv := invalid || bad
		cost := used
		if base64Counted && inv {
			cost += base64Member + base64.StdEncoding.EncodedLen(i+size)
		}
		if cost > room {
			break
		}
		i += size
		n, invalid = i, inv
	}
	return n, base64Counted && invalid
}

// escapedUnit returns the byte size of the UTF-8 sequence (or invalid byte) at s[i], the
// length appendString writes for it, and whether it is an invalid byte.
func escapedUnit(s string, i int) (size, enc int, invalid bool) {
	c := s[i]
	if c < utf8.RuneSelf {
		switch {
		case strSafe[c]:
			return 1, 1, false
		case c == '"' || c == '\\' || c == '\b' || c == '\f' || c == '\n' || c == '\r' || c == '\t':
			return 1, 2, false
		default:
			return 1, 6, false
		}
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && size == 1:
		return 1, 6, true
	case r == '\u2028' || r == '\u2029':
		return size, 6, false
	}
	return size, size, false
}

// poisonCopySize is len(poisonCopy(payload, dl)), computed without building it.
func poisonCopySize(payload []byte, dl *DeadLetter) int {
	n := len(`{"raw":"","dead_letter":}`) + len(appendDeadLetter(nil, dl))
	s := string(payload)
	invalid := false
	for i := 0; i < len(s); {
		size, enc, bad := escapedUnit(s, i)
		n += enc
		invalid = invalid || bad
		i += size
	}
	if invalid {
		n += base64Member + base64.StdEncoding.EncodedLen(len(payload))
	}
	return n
}
