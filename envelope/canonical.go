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

// canonicalMember is a member of the canonical shape: its key as written, quotes and colon
// included, and its id.
type canonicalMember struct {
	key string
	id  memberID
}

// canonicalTop and canonicalMeta are the members of the canonical shape's objects, in the
// encoders' order; any of them may be absent.
var (
	canonicalTop = [...]canonicalMember{
		{`"job":`, memberJob},
		{`"trace_id":`, memberTraceID},
		{`"data":`, memberData},
		{`"meta":`, memberMeta},
		{`"attempts":`, memberAttempts},
	}
	canonicalMeta = [...]canonicalMember{
		{`"id":`, memberMetaID},
		{`"queue":`, memberMetaQueue},
		{`"lang":`, memberMetaLang},
		{`"schema_version":`, memberMetaSchemaVersion},
		{`"created_at":`, memberMetaCreatedAt},
	}
)

// canonical decodes the payload when it has the canonical shape and reports whether it did.
// When it did not, d is as it was made (its payload and mode), for the general path.
func (d *decoder) canonical() bool {
	end, touched, ok := d.canonicalObject(0, canonicalTop[:], 1)
	if ok && end == len(d.s) {
		return true
	}
	if touched {
		*d = decoder{s: d.s, slow: d.slow}
	}
	return false
}

// canonicalObject decodes the object at s[i] of the given members, nested depth levels deep
// (the frame is 1), and returns the offset just past it. touched says whether a member was
// recorded in d; ok is false when the object is not of the canonical shape, or a value was
// refused.
func (d *decoder) canonicalObject(i int, members []canonicalMember, depth int) (end int, touched, ok bool) {
	s := d.s
	if i >= len(s) || s[i] != '{' {
		return i, false, false
	}
	i++
	first := true
	for k := range members {
		m := &members[k]
		j := i
		if !first {
			if j >= len(s) || s[j] != ',' {
				break // the object ends here, or is not canonical
			}
			j++
		}
		if len(s)-j < len(m.key) || string(s[j:j+len(m.key)]) != m.key {
			continue // absent, or another key: the next member is tried at the same place
		}
		j += len(m.key)
		if j == len(s) {
			return j, touched, false // no value: member reads one byte at least
		}
		touched = true
		d.depth = depth
		if m.id == memberMeta {
			// The general path's member would first clear what an earlier meta left: in
			// this shape there is none.
			var metaOK bool
			if j, _, metaOK = d.canonicalObject(j, canonicalMeta[:], depth+1); !metaOK {
				return j, true, false
			}
		} else {
			var err *PoisonError
			if j, err = d.member(j, m.id); err != nil {
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
