package envelope

// The canonical path. The SDKs' encoders write one shape: a compact object (no whitespace
// outside strings and data) whose members are known ones, each once, in the encoders'
// order (canonicalNext), and a meta object of the same kind. For that shape the general
// path's work a member (the key recognised, the whitespace skipped on both sides of the
// colon and before the comma, the member count, the key's span kept for a table) is
// punctuation that can be checked in one comparison: the key text with its quotes and colon.
// The values still go through member, exactly as the general path decodes them, so an
// accepted payload is recorded the same way by both paths; anything else (another order,
// whitespace, an unknown, forbidden or repeated key, a value that member refuses, trailing
// bytes) leaves the decision to the general path, from the start.

// canonicalKey returns the length of the key of member id as the encoders write it (quotes
// and colon included) when s starts with it, and 0 otherwise. Each key is a constant of at
// most 16 bytes (the one longer key is split in two), which the compiler compares a word or
// two at a time; a key read from a table would be compared by a call to the runtime, about
// twice the instructions a key. The lengths are the constants' own. TestCanonicalKey checks
// each text against the name that the general path knows (knownNames).
func canonicalKey(s []byte, id memberID) int {
	switch id {
	case memberJob:
		const k = `"job":`
		if len(s) >= len(k) && string(s[:len(k)]) == k {
			return len(k)
		}
	case memberTraceID:
		const k = `"trace_id":`
		if len(s) >= len(k) && string(s[:len(k)]) == k {
			return len(k)
		}
	case memberData:
		const k = `"data":`
		if len(s) >= len(k) && string(s[:len(k)]) == k {
			return len(k)
		}
	case memberMeta:
		const k = `"meta":`
		if len(s) >= len(k) && string(s[:len(k)]) == k {
			return len(k)
		}
	case memberAttempts:
		const k = `"attempts":`
		if len(s) >= len(k) && string(s[:len(k)]) == k {
			return len(k)
		}
	case memberMetaID:
		const k = `"id":`
		if len(s) >= len(k) && string(s[:len(k)]) == k {
			return len(k)
		}
	case memberMetaQueue:
		const k = `"queue":`
		if len(s) >= len(k) && string(s[:len(k)]) == k {
			return len(k)
		}
	case memberMetaLang:
		const k = `"lang":`
		if len(s) >= len(k) && string(s[:len(k)]) == k {
			return len(k)
		}
	case memberMetaSchemaVersion:
		const k1, k2 = `"schema_`, `version":` // `"schema_version":`, past 16 bytes
		if len(s) >= len(k1+k2) && string(s[:len(k1)]) == k1 && string(s[len(k1):len(k1+k2)]) == k2 {
			return len(k1 + k2)
		}
	case memberMetaCreatedAt:
		const k = `"created_at":`
		if len(s) >= len(k) && string(s[:len(k)]) == k {
			return len(k)
		}
	default: // not a member of the canonical shape
	}
	return 0
}

// canonical decodes the payload when it has the canonical shape and reports whether it did.
// When it did not, d is as it was made (its payload and mode), for the general path.
func (d *decoder) canonical() bool {
	end, touched, ok := d.canonicalObject(0, levelTop, 1)
	if ok && end == len(d.s) {
		return true
	}
	if touched {
		*d = decoder{s: d.s, slow: d.slow}
	}
	return false
}

// canonicalObject decodes the object at s[i] of level lvl, nested depth levels deep (the
// frame is 1), and returns the offset just past it. Its members are those of the encoders'
// order (canonicalFirst, canonicalNext), each of them optional; a dead_letter member leaves
// the decision to the general path. touched says whether a member was recorded in d; ok is
// false when the object is not of the canonical shape, or a value was refused.
func (d *decoder) canonicalObject(i int, lvl level, depth int) (end int, touched, ok bool) {
	s := d.s
	if i >= len(s) || s[i] != '{' {
		return i, false, false
	}
	i++
	first := true
	for id := canonicalFirst[lvl]; id != memberUnknown && id != memberDeadLetter; id = canonicalNext[id] {
		j := i
		if !first {
			if j >= len(s) || s[j] != ',' {
				break // the object ends here, or is not canonical
			}
			j++
		}
		n := canonicalKey(s[j:], id)
		if n == 0 {
			continue // absent, or another key: the next member is tried at the same place
		}
		j += n
		if j == len(s) {
			return j, touched, false // no value: member reads one byte at least
		}
		touched = true
		d.depth = depth
		if id == memberMeta {
			// The general path's member would first clear what an earlier meta left: in
			// this shape there is none.
			var metaOK bool
			if j, _, metaOK = d.canonicalObject(j, levelMeta, depth+1); !metaOK {
				return j, true, false
			}
		} else {
			var err *PoisonError
			if j, err = d.member(j, id); err != nil {
				return j, true, false
			}
		}
		i, first = j, false
	}
	if first || i >= len(s) || s[i] != '}' {
		return i, touched, false
	}
	return i + 1, touched, true
}
