package envelope

// The canonical path. The SDKs' encoders write one shape: a compact object (no whitespace
// outside strings and data) whose members are known ones, each once, in the encoders'
// order (canonicalNext), and a meta object of the same kind. For that shape the general
// path's work a member (the key recognised, the whitespace skipped on both sides of the
// colon and before the comma, the member count, the key's span kept for a table) is
// punctuation that can be checked in one comparison: the key text with its quotes and colon
// (keyAt).
// The values still go through member, exactly as the general path decodes them, so an
// accepted payload is recorded the same way by both paths; anything else (another order,
// whitespace, an unknown, forbidden or repeated key, a value that member refuses, trailing
// bytes) leaves the decision to the general path, from the start.

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

// canonicalObject decodes the object at s[i] of level lvl (the frame or meta), nested depth
// levels deep (the frame is 1), and returns the offset just past it. Its members are those
// of the encoders' order (the one canonicalFirst and canonicalNext give the general path,
// which TestCanonicalKeys holds them to), each of them optional; a dead_letter member
// leaves the decision to the general path. touched says whether a member was recorded in d;
// ok is false when the object is not of the canonical shape, or a value was refused.
//
// The members are written out one after the other, not looped over: each key is then a
// constant where keyAt is inlined, which the compiler compares a word at a time (a call to
// the runtime's comparison for the keys past 8 bytes), and the loop's bookkeeping (the next
// member from a table, a switch to its key, the state saved around each call) is gone. The
// loop took 192 more instructions on the compact order-created body, about a twentieth of
// Classify's there.
func (d *decoder) canonicalObject(i int, lvl level, depth int) (end int, touched, ok bool) {
	s := d.s
	if i >= len(s) || s[i] != '{' {
		return i, false, false
	}
	i++
	first := true
	if lvl == levelTop {
		if j := keyAt(s, i, first, `"job":`); j > 0 {
			if i, ok = d.canonicalMember(j, memberJob, depth); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
		if j := keyAt(s, i, first, `"trace_id":`); j > 0 {
			if i, ok = d.canonicalMember(j, memberTraceID, depth); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
		if j := keyAt(s, i, first, `"data":`); j > 0 {
			if i, ok = d.canonicalMember(j, memberData, depth); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
		if j := keyAt(s, i, first, `"meta":`); j > 0 {
			// The general path's member would first clear what an earlier meta left: in
			// this shape there is none.
			if i, _, ok = d.canonicalObject(j, levelMeta, depth+1); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
		if j := keyAt(s, i, first, `"attempts":`); j > 0 {
			if i, ok = d.canonicalMember(j, memberAttempts, depth); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
	} else {
		if j := keyAt(s, i, first, `"id":`); j > 0 {
			if i, ok = d.canonicalMember(j, memberMetaID, depth); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
		if j := keyAt(s, i, first, `"queue":`); j > 0 {
			if i, ok = d.canonicalMember(j, memberMetaQueue, depth); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
		if j := keyAt(s, i, first, `"lang":`); j > 0 {
			if i, ok = d.canonicalMember(j, memberMetaLang, depth); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
		if j := keyAt(s, i, first, `"schema_version":`); j > 0 {
			if i, ok = d.canonicalMember(j, memberMetaSchemaVersion, depth); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
		if j := keyAt(s, i, first, `"created_at":`); j > 0 {
			if i, ok = d.canonicalMember(j, memberMetaCreatedAt, depth); !ok {
				return i, true, false
			}
			first, touched = false, true
		}
	}
	if first || i >= len(s) || s[i] != '}' {
		return i, touched, false
	}
	return i + 1, touched, true
}

// keyAt returns the offset of the value of the member whose key k (its text as the
// encoders write it: quotes and colon included) starts at s[i], after a comma unless first,
// and 0 when the key is not there or nothing follows it. Another key, or none, at s[i] is
// not an error: the next member of the order is tried at the same place.
func keyAt(s []byte, i int, first bool, k string) int {
	if !first {
		if i >= len(s) || s[i] != ',' {
			return 0
		}
		i++
	}
	if len(s)-i > len(k) && string(s[i:i+len(k)]) == k {
		return i + len(k)
	}
	return 0
}

// canonicalMember decodes the value at s[j] of member id with member, exactly as the
// general path does (depth is the object's, as the general path sets it), and reports
// whether member accepted it.
func (d *decoder) canonicalMember(j int, id memberID, depth int) (int, bool) {
	d.depth = depth
	j, err := d.member(j, id)
	return j, err == nil
}
