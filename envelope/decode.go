package envelope

import (
	"bytes"
	"hash/maphash"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// MaxMembers bounds the number of members of each object that [Decode] reads into an
// envelope: the frame, meta and dead_letter. Every occurrence counts, duplicates included;
// one more is poison ([RuleMembers]). Objects inside data and inside unknown members are not
// counted (they are kept as text, not as members). The bound keeps the memory of a decoded
// envelope proportional to what a real producer sends: a 5 MB body of one-byte keys would
// otherwise hold about 800,000 members.
const MaxMembers = 250_000

// linearMembers is the length up to which a member table is searched linearly for a
// duplicate key; longer tables get a hash index, so decoding n unknown keys costs O(n).
const linearMembers = 8

// Decode parses payload strictly and losslessly (acceptance rules 1–4 and 7 of the package doc). It
// returns a *[PoisonError] (matching [ErrPoison]) when the payload is not valid UTF-8, not
// exactly one JSON object, or a known member has the wrong JSON type. It does not check
// rules 5–6 (URN, schema version, data, trace_id): use [Classify] to decide acceptance.
//
// Decode copies what the envelope keeps of payload once (see "Ownership of bytes" in the
// package doc); the caller may reuse its buffer as soon as it returns.
func Decode(payload []byte) (*Envelope, error) { return decode(payload, false) }

// decode is Decode, with every value scanned by the general scanner alone when slow is set
// (the differential fuzz targets compare the two).
func decode(payload []byte, slow bool) (*Envelope, error) {
	if uint64(len(payload)) > maxPayload {
		return nil, poison(RuleSingleObject, "", "payload of "+strconv.Itoa(len(payload))+
			" bytes is larger than the decoder's limit of 4 GiB")
	}
	d := decoder{s: payload, slow: slow}
	if err := d.frame(); err != nil {
		// Rule 1 comes first. The scan validates UTF-8 inside strings, the only place JSON
		// allows non-ASCII bytes, so an accepted payload is valid UTF-8; a refused one is
		// checked whole here, so the rule does not depend on where the scan stopped.
		if !utf8.Valid(payload) {
			return nil, poison(RuleUTF8, "", "payload is not valid UTF-8 (first invalid byte at "+
				strconv.Itoa(firstInvalidUTF8(payload))+")")
		}
		return nil, err
	}
	return d.build(), nil
}

// Classify decides whether payload is acceptable (all the acceptance rules of the package doc). A nil error
// means the envelope may be handled; otherwise the error is a *[PoisonError] naming the
// failed rule and the envelope is nil. It is a pure function.
func Classify(payload []byte) (*Envelope, error) { return classify(payload, false) }

// classify is Classify, with the general scanner alone when slow is set (see decode).
func classify(payload []byte, slow bool) (*Envelope, error) {
	e, err := decode(payload, slow)
	if err != nil {
		return nil, err
	}
	if err := e.check(); err != nil {
		return nil, err
	}
	return e, nil
}

// check applies rules 5 and 6 to a decoded envelope.
func (e *Envelope) check() *PoisonError {
	switch {
	case e.URN() == "":
		return poison(RuleURN, "/job", "no job or urn: the resolved urn is blank")
	case e.Meta.SchemaVersion != SchemaVersion:
		return poison(RuleSchemaVersion, "/meta/schema_version",
			"meta.schema_version is "+strconv.Itoa(e.Meta.SchemaVersion)+", want 1 (0 when missing)")
	case len(e.Data) == 0:
		return poison(RuleData, "/data", "data is missing")
	case IsBlank(e.TraceID):
		return poison(RuleTraceID, "/trace_id", "trace_id is missing or blank")
	}
	return nil
}

// level selects the member table of the object being decoded.
type level uint8

const (
	levelTop level = iota
	levelMeta
	levelDeadLetter
)

// strField names the string members of an envelope, which the decoder records as spans of
// the payload until it builds the envelope.
type strField uint8

const (
	strJob strField = iota
	strTraceID
	strURN
	strMetaID
	strMetaQueue
	strMetaLang
	strDLReason
	strDLError
	strDLException
	strDLOriginalQueue
	strDLLang
	numStrFields
)

// strValue is the last occurrence of a string member: the text between its quotes, whether
// it has escapes, and whether the member is present with a string (not absent or null).
type strValue struct {
	text     span
	esc, set bool
}

// decoder is a single pass over the caller's payload, which it only reads. It records what
// the envelope keeps (the string members, data and the unknown members) as offsets of the
// payload and the rest (numbers, warnings) in env; when the payload is accepted, build
// copies the kept text into one allocation with the Envelope and makes the text members
// views of that copy. A refused payload therefore costs no allocation for the envelope.
type decoder struct {
	s     []byte
	env   Envelope // everything but the text members; DeadLetter is set when present
	depth int      // nesting depth of the object whose member is being decoded (frame = 1)
	// key is the raw text of the key being decoded (quotes included) and keyEscaped whether
	// it contains escapes.
	key        span
	keyEscaped bool
	strs       [numStrFields]strValue
	data       span // the data text as scanned (zero when absent)
	dataWS     bool // whether data has insignificant whitespace
	hasData    bool
	// tables collect the unknown members of the last object of each level.
	tables [3]memberTable
	slow   bool // scan values with the general scanner alone (see decode)
}

// value validates the value at s[i], nested depth levels deep (see scanValue).
func (d *decoder) value(i, depth int) (int, bool, *syntaxError) {
	if d.slow {
		return slowValue(d.s, i, depth)
	}
	return scanValue(d.s, i, depth)
}

// span is the offsets [start, end) of a text in the payload (a payload is shorter than
// maxPayload).
type span struct{ start, end uint32 }

func (s span) len() int { return int(s.end - s.start) }

// maxPayload bounds the payload so that offsets fit a span.
const maxPayload = 1<<32 - 1

func mkSpan(start, end int) span { return span{uint32(start), uint32(end)} } //nolint:gosec // G115: offsets < maxPayload

// memberTable holds the unknown members of one object while it is decoded, as offsets into
// the payload (no pointers, so the garbage collector does not scan a long list), in the order
// of first occurrence. build writes them out as one string.
type memberTable struct {
	members []tableMember
	index   memberIndex
	// escaped holds the decoded names of members whose (last) key is spelled with escapes,
	// by position; the other names are the key text without quotes.
	escaped map[int]string
	// size is the length of the members' text as received: the bound of their compact
	// text `,<key>:<value>`… that build writes.
	size int
}

type tableMember struct {
	key, raw span // the last occurrence's key text (quotes included) and value as scanned
	ws       bool // whether raw has insignificant whitespace
}

// sub returns s[i:j] as a string sharing the payload. Such strings only live while Decode
// runs: nothing returned to the caller refers to them (error texts concatenate copies).
func (d *decoder) sub(i, j int) string {
	if j <= i {
		return ""
	}
	return unsafe.String(&d.s[i], j-i) //nolint:gosec // G103: read only, and dropped when Decode returns
}

// frame decodes the payload: on the canonical path when it has the encoders' own shape
// (canonical.go), else on the general path.
func (d *decoder) frame() *PoisonError {
	if !d.slow && d.canonical() {
		return nil
	}
	return d.general()
}

// general decodes the payload, whatever its shape, from a decoder as it was made.
func (d *decoder) general() *PoisonError {
	s := d.s
	i := skipWS(s, 0)
	switch {
	case i >= len(s):
		return poison(RuleSingleObject, "", "payload is empty or only whitespace")
	case bytes.HasPrefix(s[i:], bom):
		return poison(RuleSingleObject, "", "payload starts with a byte order mark")
	case s[i] != '{':
		if _, _, err := d.value(i, 0); err != nil {
			return syntaxPoison("", err)
		}
		return poison(RuleSingleObject, "", "payload is a JSON "+kindOf(s[i])+", not an object")
	}
	end, err := d.object(i, levelTop, "")
	if err != nil {
		return err
	}
	if j := skipWS(s, end); j != len(s) {
		return poison(RuleSingleObject, "", "trailing bytes after the object at byte "+strconv.Itoa(j))
	}
	return nil
}

// object decodes the object starting at s[i] == '{' into the table of lvl and returns the
// offset just past it. prefix is the JSON pointer of the object ("" for the frame).
func (d *decoder) object(i int, lvl level, prefix string) (int, *PoisonError) {
	s := d.s
	i = skipWS(s, i+1)
	if i < len(s) && s[i] == '}' {
		return i + 1, nil
	}
	hint := canonicalFirst[lvl]
	for count := 1; ; count++ {
		if count > MaxMembers {
			return i, poison(RuleMembers, prefix, objectName(prefix)+" has more than "+
				strconv.Itoa(MaxMembers)+" members (MaxMembers)")
		}
		if i >= len(s) || s[i] != '"' {
			return i, syntaxPoison(prefix, errExpect(s, i, "a string key"))
		}
		// A known key spelled plainly is recognised without scanning it as a string.
		id, kEnd := plainKey(lvl, s, i, hint)
		name := ""
		d.keyEscaped = false
		if id == memberUnknown {
			end, kEsc, serr := scanString(s, i)
			if serr != nil {
				return i, syntaxPoison(prefix, serr)
			}
			kEnd = end
			d.keyEscaped = kEsc
			name = d.sub(i+1, kEnd-1)
			if kEsc {
				name = unescape(name)
			}
			id = memberNamed(lvl, name)
		}
		hint = canonicalNext[id]
		d.key = mkSpan(i, kEnd)
		i = skipWS(s, kEnd)
		if i >= len(s) || s[i] != ':' {
			return i, syntaxPoison(prefix, errExpect(s, i, "':' after an object key"))
		}
		i = skipWS(s, i+1)
		if i >= len(s) {
			return i, syntaxPoison(prefix, errSyntax(i, "unexpected end of input, want a value"))
		}
		var err *PoisonError
		d.depth = 2
		if lvl == levelTop {
			d.depth = 1
		}
		if id == memberUnknown {
			i, err = d.unknown(i, name, lvl)
		} else {
			i, err = d.member(i, id)
		}
		if err != nil {
			return i, err
		}
		i = skipWS(s, i)
		if i >= len(s) {
			return i, syntaxPoison(prefix, errSyntax(i, "unexpected end of input in an object"))
		}
		switch s[i] {
		case ',':
			i = skipWS(s, i+1)
		case '}':
			return i + 1, nil
		default:
			return i, syntaxPoison(prefix, errExpect(s, i, "',' or '}' after an object member"))
		}
	}
}

// member decodes the value at s[i] of the known member id.
func (d *decoder) member(i int, id memberID) (int, *PoisonError) {
	e := &d.env
	var err *PoisonError
	var n int64
	switch id {
	case memberJob:
		i, err = d.str(i, "/job", strJob)
	case memberTraceID:
		i, err = d.str(i, "/trace_id", strTraceID)
	case memberURN:
		start := i
		i, err = d.str(i, "/urn", strURN)
		if err == nil {
			d.addMember(levelTop, "urn", mkSpan(start, i), false)
		}
	case memberData:
		if d.s[i] != '{' {
			return d.typeErr(i, "/data", "an object")
		}
		end, ws, serr := d.value(i, d.depth)
		if serr != nil {
			return end, syntaxPoison("/data", serr)
		}
		d.data, d.dataWS, d.hasData = mkSpan(i, end), ws, true
		i = end
	case memberMeta:
		if d.s[i] != '{' {
			return d.typeErr(i, "/meta", "an object")
		}
		// A duplicate meta replaces the earlier one entirely.
		e.Meta = Meta{}
		d.strs[strMetaID], d.strs[strMetaQueue], d.strs[strMetaLang] = strValue{}, strValue{}, strValue{}
		d.tables[levelMeta] = memberTable{}
		return d.object(i, levelMeta, "/meta")
	case memberAttempts:
		n, i, err = d.integer(i, "/attempts", true)
		e.Attempts = int(max(n, 0))
	case memberDeadLetter:
		if d.s[i] != '{' {
			return d.typeErr(i, "/dead_letter", "an object")
		}
		e.DeadLetter = &DeadLetter{}
		for f := strDLReason; f <= strDLLang; f++ {
			d.strs[f] = strValue{}
		}
		d.tables[levelDeadLetter] = memberTable{}
		return d.object(i, levelDeadLetter, "/dead_letter")
	case memberTimestamp, memberMetaMaxRetries, memberMetaAttempts, memberMetaSource, memberMetaTS:
		return d.forbidden(i, memberPointer[id])

	case memberMetaID:
		i, err = d.str(i, "/meta/id", strMetaID)
	case memberMetaQueue:
		i, err = d.str(i, "/meta/queue", strMetaQueue)
	case memberMetaLang:
		i, err = d.str(i, "/meta/lang", strMetaLang)
	case memberMetaSchemaVersion:
		n, i, err = d.integer(i, "/meta/schema_version", true)
		e.Meta.SchemaVersion = int(n)
	case memberMetaCreatedAt:
		e.Meta.CreatedAt, i, err = d.integer(i, "/meta/created_at", false)

	case memberDLReason:
		i, err = d.str(i, "/dead_letter/reason", strDLReason)
	case memberDLError:
		i, err = d.nullableStr(i, "/dead_letter/error", strDLError)
	case memberDLException:
		i, err = d.nullableStr(i, "/dead_letter/exception", strDLException)
	case memberDLFailedAt:
		e.DeadLetter.FailedAt, i, err = d.integer(i, "/dead_letter/failed_at", false)
	case memberDLOriginalQueue:
		i, err = d.str(i, "/dead_letter/original_queue", strDLOriginalQueue)
	case memberDLAttempts:
		n, i, err = d.integer(i, "/dead_letter/attempts", true)
		e.DeadLetter.Attempts = int(n)
	case memberDLLang:
		i, err = d.str(i, "/dead_letter/lang", strDLLang)
	default: // memberUnknown: object decodes those with unknown
	}
	return i, err
}

// str records the string member at s[i] as field f, or fails with RuleType.
func (d *decoder) str(i int, ptr string, f strField) (int, *PoisonError) {
	if i >= len(d.s) || d.s[i] != '"' {
		return d.typeErr(i, ptr, "a string")
	}
	end, esc, serr := scanString(d.s, i)
	if serr != nil {
		return end, syntaxPoison(ptr, serr)
	}
	d.strs[f] = strValue{text: mkSpan(i+1, end-1), esc: esc, set: true}
	return end, nil
}

// nullableStr records the string or null member at s[i] as field f (null unsets it).
func (d *decoder) nullableStr(i int, ptr string, f strField) (int, *PoisonError) {
	if i < len(d.s) && d.s[i] == 'n' {
		end, _, serr := scanLiteral(d.s, i, "null")
		if serr != nil {
			return end, syntaxPoison(ptr, serr)
		}
		d.strs[f] = strValue{}
		return end, nil
	}
	return d.str(i, ptr, f)
}

// integer decodes the JSON integer member at s[i] that must fit an int64 (or an int when
// asInt is set), or fails with RuleType (strings, fractions, exponents, overflow).
func (d *decoder) integer(i int, ptr string, asInt bool) (int64, int, *PoisonError) {
	s := d.s
	// The common case first: an integer of at most 18 digits (it cannot overflow) without a
	// leading zero, not followed by a fraction or exponent. Anything else takes the full path.
	j := i
	if j < len(s) && s[j] == '-' {
		j++
	}
	first := j
	var u uint64
	for j < len(s) { // past 18 digits u may wrap; such a number takes the full path
		c := s[j] - '0'
		if c > 9 {
			break
		}
		u = u*10 + uint64(c)
		j++
	}
	if nd := j - first; nd > 0 && nd < 19 && (nd == 1 || s[first] != '0') &&
		(j == len(s) || s[j] != '.' && s[j] != 'e' && s[j] != 'E') {
		v := int64(u) // u < 10^18
		if first != i {
			v = -v
		}
		if !asInt || int64(int(v)) == v {
			return v, j, nil
		}
	}
	if i >= len(s) || (s[i] != '-' && (s[i] < '0' || s[i] > '9')) {
		end, err := d.typeErr(i, ptr, "a JSON integer")
		return 0, end, err
	}
	end, isInt, serr := scanNumber(s, i)
	if serr != nil {
		return 0, end, syntaxPoison(ptr, serr)
	}
	tok := d.sub(i, end)
	if !isInt {
		return 0, end, poison(RuleType, ptr, field(ptr)+" must be a JSON integer, got "+tok)
	}
	n, ok := parseInt(tok)
	if ok && asInt {
		ok = int64(int(n)) == n
	}
	if !ok {
		return 0, end, poison(RuleType, ptr, field(ptr)+" is out of range: "+tok)
	}
	return n, end, nil
}

// typeErr validates the value at s[i] and reports it as a RuleType failure (or as
// RuleSingleObject when the value itself is malformed).
func (d *decoder) typeErr(i int, ptr, want string) (int, *PoisonError) {
	end, _, serr := d.value(i, d.depth)
	if serr != nil {
		return end, syntaxPoison(ptr, serr)
	}
	return end, poison(RuleType, ptr, field(ptr)+" must be "+want+", got "+kindOf(d.s[i]))
}

// forbidden validates and skips the value of a forbidden key and records a warning.
func (d *decoder) forbidden(i int, ptr string) (int, *PoisonError) {
	end, _, serr := d.value(i, d.depth)
	if serr != nil {
		return end, syntaxPoison(ptr, serr)
	}
	if d.env.rare == nil {
		d.env.rare = new(rareParts)
	}
	ws := &d.env.rare.warnings
	for _, w := range *ws {
		if w.Pointer == ptr {
			return end, nil
		}
	}
	*ws = append(*ws, Warning{
		Pointer: ptr,
		Message: "forbidden key " + ptr + " ignored and dropped on re-encode",
	})
	return end, nil
}

// unknown validates the value of an unknown member and keeps it (as offsets) in the member
// table of lvl.
func (d *decoder) unknown(i int, name string, lvl level) (int, *PoisonError) {
	end, ws, serr := d.value(i, d.depth)
	if serr != nil {
		return end, syntaxPoison(levelPointer[lvl]+"/"+escapePointer(name), serr)
	}
	d.addMember(lvl, name, mkSpan(i, end), ws)
	return end, nil
}

// levelPointer is the JSON pointer of the object of each level.
var levelPointer = [...]string{levelTop: "", levelMeta: "/meta", levelDeadLetter: "/dead_letter"}

// memberName returns the decoded name of member k of t.
func (d *decoder) memberName(t *memberTable, k int) string {
	if name, ok := t.escaped[k]; ok {
		return name
	}
	key := t.members[k].key
	return d.sub(int(key.start)+1, int(key.end)-1)
}

// addMember adds the member with the current key (d.key), decoded name and value raw (with
// whitespace when ws) to the table of lvl, or, for a duplicate name, replaces the earlier
// key text and value in place: the last value wins and the key keeps its first position.
// Short tables are searched linearly; a longer one gets an index, so each call is O(1)
// expected.
func (d *decoder) addMember(lvl level, name string, raw span, ws bool) {
	t := &d.tables[lvl]
	m := tableMember{key: d.key, raw: raw, ws: ws}
	t.size += 2 + m.key.len() + raw.len()
	if t.index.slots == nil {
		for k := range t.members {
			if d.memberName(t, k) == name {
				d.replaceMember(t, k, m, name)
				return
			}
		}
		d.appendMember(t, m, name)
		if len(t.members) > linearMembers {
			d.rebuild(t)
		}
		return
	}
	h := maphash.String(indexSeed, name)
	tag := uint32(h>>32) &^ posMask
	slots := t.index.slots
	mask := uint64(len(slots)) - 1
	for i := h & mask; ; i = (i + 1) & mask {
		slot := slots[i]
		if slot == 0 {
			slots[i] = tag | uint32(len(t.members)+1) //nolint:gosec // G115: a position < MaxMembers
			d.appendMember(t, m, name)
			if 2*len(t.members) > len(slots) {
				d.rebuild(t)
			}
			return
		}
		if k := int(slot&posMask) - 1; slot&^posMask == tag && d.memberName(t, k) == name {
			d.replaceMember(t, k, m, name)
			return
		}
	}
}

// replaceMember gives member k of t the key text and value of m, a later duplicate with
// the decoded name.
func (d *decoder) replaceMember(t *memberTable, k int, m tableMember, name string) {
	old := &t.members[k]
	t.size -= 2 + old.key.len() + old.raw.len()
	*old = m
	switch {
	case d.keyEscaped:
		d.setEscaped(t, k, name)
	case t.escaped != nil:
		delete(t.escaped, k)
	}
}

// setEscaped records the decoded name of member k of t, whose key has escapes.
func (*decoder) setEscaped(t *memberTable, k int, name string) {
	if t.escaped == nil {
		t.escaped = map[int]string{}
	}
	t.escaped[k] = name
}

// appendMember appends a new member to t, doubling a full list (append grows a large slice
// by only 1.25×, which copies a long list about five times over).
func (d *decoder) appendMember(t *memberTable, m tableMember, name string) {
	if len(t.members) == cap(t.members) {
		t.members = slices.Grow(t.members, max(len(t.members), 4))
	}
	if d.keyEscaped {
		d.setEscaped(t, len(t.members), name)
	}
	t.members = append(t.members, m)
}

// build makes the envelope of an accepted payload with one allocation (newEnvelope) for
// the Envelope and the text it keeps: each string member, data and the unknown members of
// each object (written out as `,<key>:<value>`…), copied from the payload one after the
// other. Only what the envelope keeps is copied, not the keys and punctuation between: for
// an envelope as the SDKs send it that is about half the payload, memory the envelope holds
// for as long as it lives (the time to decode is the same as with a copy of the whole
// payload). Strings with escapes are unescaped and data with whitespace is compacted as
// they are copied; strings and Data are views of the allocation, each region written once.
func (d *decoder) build() *Envelope {
	e, buf := newEnvelope(d.keptLen())
	// Only the members the decoder sets, so that storing the zero rest costs nothing.
	e.Meta.SchemaVersion, e.Meta.CreatedAt = d.env.Meta.SchemaVersion, d.env.Meta.CreatedAt
	e.Attempts, e.DeadLetter = d.env.Attempts, d.env.DeadLetter
	b := builder{src: d.s, buf: buf}
	e.Job = b.str(d.strs[strJob])
	e.TraceID = b.str(d.strs[strTraceID])
	urn := b.str(d.strs[strURN])
	e.Meta.ID = b.str(d.strs[strMetaID])
	e.Meta.Queue = b.str(d.strs[strMetaQueue])
	e.Meta.Lang = b.str(d.strs[strMetaLang])
	unknown := b.members(&d.tables[levelTop])
	if r := d.env.rare; r != nil || urn != "" || unknown != "" {
		if r == nil {
			r = new(rareParts) // a second allocation, for an envelope with an urn alias or unknown members
		}
		r.urn, r.unknown = urn, unknown
		e.rare = r
	}
	e.Meta.unknown = b.members(&d.tables[levelMeta])
	if dl := e.DeadLetter; dl != nil {
		dl.Reason = Reason(b.str(d.strs[strDLReason]))
		dl.Error = b.nullableStr(d.strs[strDLError])
		dl.Exception = b.nullableStr(d.strs[strDLException])
		dl.OriginalQueue = b.str(d.strs[strDLOriginalQueue])
		dl.Lang = b.str(d.strs[strDLLang])
		dl.unknown = b.members(&d.tables[levelDeadLetter])
	}
	if d.hasData {
		start := b.w
		b.value(d.s[d.data.start:d.data.end], d.dataWS)
		// A full slice expression: appending to Data reallocates instead of overwriting
		// the text after it.
		e.Data = buf[start:b.w:b.w]
	}
	return e
}

// keptLen bounds the length of the text that build copies: the string members and data as
// received (unescaping and compacting only shorten them) and the unknown members' text.
func (d *decoder) keptLen() int {
	n := 0
	for f := range d.strs {
		n += d.strs[f].text.len()
	}
	if d.hasData {
		n += d.data.len()
	}
	for k := range d.tables {
		n += d.tables[k].size
	}
	return n
}

// builder fills the buffer of an envelope from the payload src, at w.
type builder struct {
	src, buf []byte
	w        int
}

// str copies the string v of the payload into the buffer, unescaped when it has escapes
// (the decoded text is never longer), and returns the copy.
func (b *builder) str(v strValue) string {
	start, end := int(v.text.start), int(v.text.end)
	if end <= start {
		return ""
	}
	w := b.w
	if v.esc {
		b.w += len(appendUnescape(b.buf[w:w], b.src[start:end]))
	} else {
		b.w += copy(b.buf[w:], b.src[start:end])
	}
	if b.w == w {
		return ""
	}
	return unsafe.String(&b.buf[w], b.w-w) //nolint:gosec // G103: the region is never written again
}

func (b *builder) nullableStr(v strValue) *string {
	if !v.set {
		return nil
	}
	s := b.str(v)
	return &s
}

// members appends the members of t as `,<key>:<value>`…, the values without insignificant
// whitespace, and returns their text.
func (b *builder) members(t *memberTable) string {
	start := b.w
	for k := range t.members {
		m := &t.members[k]
		b.buf[b.w] = ','
		b.w++
		b.w += copy(b.buf[b.w:], b.src[m.key.start:m.key.end])
		b.buf[b.w] = ':'
		b.w++
		b.value(b.src[m.raw.start:m.raw.end], m.ws)
	}
	if b.w == start {
		return ""
	}
	return unsafe.String(&b.buf[start], b.w-start) //nolint:gosec // G103: the region is never written again
}

// value appends the JSON text raw, without its insignificant whitespace when ws is set.
func (b *builder) value(raw []byte, ws bool) {
	if ws {
		b.w += compactInto(b.buf[b.w:], raw)
	} else {
		b.w += copy(b.buf[b.w:], raw)
	}
}

// compactInto writes the valid JSON text src into dst (at least as long) without its
// insignificant whitespace and returns the length written. dst may start where src starts:
// each byte is written after it was read.
func compactInto(dst, src []byte) int {
	dst = dst[:len(src)]
	w := 0
	for r := 0; r < len(src); r++ {
		c := src[r]
		switch {
		case c == '"':
			dst[w] = c
			w++
			for { // the string through its closing quote, escapes copied whole
				r++
				c = src[r]
				dst[w] = c
				w++
				if c == '"' {
					break
				}
				if c == '\\' {
					r++
					dst[w] = src[r]
					w++
				}
			}
		case c <= ' ' && isWS(c):
		default:
			dst[w] = c
			w++
		}
	}
	return w
}

var indexSeed = maphash.MakeSeed()

// memberIndex is an open-addressing hash table (linear probing, at most half full) of the
// positions of a member table, keyed by the members' decoded names. Each slot holds 14 high
// bits of the name's hash beside the position, so a probe reads the table only on a
// likely match; it holds no pointers; and one probe sequence both finds a duplicate and
// claims the slot of a new key.
type memberIndex struct {
	slots []uint32 // hash tag | position+1 in the table, 0 for an empty slot; len is a power of two
}

// posMask selects the position part of a slot (18 bits, MaxMembers fits); the other 14 bits
// hold the tag, bits of the hash not used to pick the slot.
const posMask = 1<<18 - 1

// rebuild indexes the distinct names of t in a table at most a quarter full.
func (d *decoder) rebuild(t *memberTable) {
	n := 64
	for n < 4*len(t.members) {
		n *= 2
	}
	slots := make([]uint32, n)
	mask := uint64(n) - 1
	for k := range t.members {
		h := maphash.String(indexSeed, d.memberName(t, k))
		i := h & mask
		for slots[i] != 0 {
			i = (i + 1) & mask
		}
		slots[i] = uint32(h>>32)&^posMask | uint32(k+1)
	}
	t.index.slots = slots
}

func syntaxPoison(ptr string, err *syntaxError) *PoisonError {
	where := ""
	if ptr != "" {
		where = " in " + ptr
	}
	return poison(RuleSingleObject, ptr, "malformed JSON"+where+": "+err.String())
}

// escapePointer escapes a key as an RFC 6901 reference token.
func escapePointer(name string) string {
	if !strings.ContainsAny(name, "~/") {
		return name
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(name)
}

func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			return i
		}
		i += size
	}
	return -1
}

// objectName names the object at pointer prefix for error details.
func objectName(prefix string) string {
	if prefix == "" {
		return "the envelope"
	}
	return field(prefix)
}

// field turns the pointer of a known member into its dotted name, e.g. meta.schema_version.
func field(ptr string) string { return strings.ReplaceAll(ptr[1:], "/", ".") }

var bom = []byte("\uFEFF")

// The envelope of a small payload and the text it keeps share one allocation: a struct
// holding the Envelope and a byte array sized so that the struct fills one of the runtime's
// size classes (up to 8 KiB; above 512 B an object with pointers carries an 8-byte malloc
// header). The strings and Data of the envelope point into the array, so they keep it alive
// exactly as long as the envelope's own memory. A larger text gets a separate buffer (two
// allocations, negligible beside its scan).
const (
	envelopeSize = int(unsafe.Sizeof(Envelope{}))
	mallocHeader = 8
)

// newEnvelope returns a zero Envelope and an n-byte buffer for the text it keeps. The cases
// are the runtime's size classes above the Envelope's own (160 B) up to 8 KiB, each one of
// them (TestNewEnvelopeFillsTheSizeClass checks them against the runtime).
func newEnvelope(n int) (*Envelope, []byte) {
	size := envelopeSize + n
	// Grouped by range, so that a common size passes a few comparisons, not every class below it.
	switch {
	case n == 0:
		return new(Envelope), nil
	case size <= 256:
		switch {
		case size <= 176:
			return withBuffer[[176 - envelopeSize]byte](n)
		case size <= 192:
			return withBuffer[[192 - envelopeSize]byte](n)
		case size <= 208:
			return withBuffer[[208 - envelopeSize]byte](n)
		case size <= 224:
			return withBuffer[[224 - envelopeSize]byte](n)
		case size <= 240:
			return withBuffer[[240 - envelopeSize]byte](n)
		case size <= 256:
			return withBuffer[[256 - envelopeSize]byte](n)
		}
	case size <= 512:
		switch {
		case size <= 288:
			return withBuffer[[288 - envelopeSize]byte](n)
		case size <= 320:
			return withBuffer[[320 - envelopeSize]byte](n)
		case size <= 352:
			return withBuffer[[352 - envelopeSize]byte](n)
		case size <= 384:
			return withBuffer[[384 - envelopeSize]byte](n)
		case size <= 416:
			return withBuffer[[416 - envelopeSize]byte](n)
		case size <= 448:
			return withBuffer[[448 - envelopeSize]byte](n)
		case size <= 480:
			return withBuffer[[480 - envelopeSize]byte](n)
		case size <= 512:
			return withBuffer[[512 - envelopeSize]byte](n)
		}
	case size <= 1024-mallocHeader:
		switch {
		case size <= 576-mallocHeader:
			return withBuffer[[576 - envelopeSize - mallocHeader]byte](n)
		case size <= 640-mallocHeader:
			return withBuffer[[640 - envelopeSize - mallocHeader]byte](n)
		case size <= 704-mallocHeader:
			return withBuffer[[704 - envelopeSize - mallocHeader]byte](n)
		case size <= 768-mallocHeader:
			return withBuffer[[768 - envelopeSize - mallocHeader]byte](n)
		case size <= 896-mallocHeader:
			return withBuffer[[896 - envelopeSize - mallocHeader]byte](n)
		case size <= 1024-mallocHeader:
			return withBuffer[[1024 - envelopeSize - mallocHeader]byte](n)
		}
	default:
		switch {
		case size <= 1152-mallocHeader:
			return withBuffer[[1152 - envelopeSize - mallocHeader]byte](n)
		case size <= 1280-mallocHeader:
			return withBuffer[[1280 - envelopeSize - mallocHeader]byte](n)
		case size <= 1408-mallocHeader:
			return withBuffer[[1408 - envelopeSize - mallocHeader]byte](n)
		case size <= 1536-mallocHeader:
			return withBuffer[[1536 - envelopeSize - mallocHeader]byte](n)
		case size <= 1792-mallocHeader:
			return withBuffer[[1792 - envelopeSize - mallocHeader]byte](n)
		case size <= 2048-mallocHeader:
			return withBuffer[[2048 - envelopeSize - mallocHeader]byte](n)
		case size <= 2304-mallocHeader:
			return withBuffer[[2304 - envelopeSize - mallocHeader]byte](n)
		case size <= 2688-mallocHeader:
			return withBuffer[[2688 - envelopeSize - mallocHeader]byte](n)
		case size <= 3072-mallocHeader:
			return withBuffer[[3072 - envelopeSize - mallocHeader]byte](n)
		case size <= 3200-mallocHeader:
			return withBuffer[[3200 - envelopeSize - mallocHeader]byte](n)
		case size <= 3456-mallocHeader:
			return withBuffer[[3456 - envelopeSize - mallocHeader]byte](n)
		case size <= 4096-mallocHeader:
			return withBuffer[[4096 - envelopeSize - mallocHeader]byte](n)
		case size <= 4864-mallocHeader:
			return withBuffer[[4864 - envelopeSize - mallocHeader]byte](n)
		case size <= 5376-mallocHeader:
			return withBuffer[[5376 - envelopeSize - mallocHeader]byte](n)
		case size <= 6144-mallocHeader:
			return withBuffer[[6144 - envelopeSize - mallocHeader]byte](n)
		case size <= 6528-mallocHeader:
			return withBuffer[[6528 - envelopeSize - mallocHeader]byte](n)
		case size <= 6784-mallocHeader:
			return withBuffer[[6784 - envelopeSize - mallocHeader]byte](n)
		case size <= 6912-mallocHeader:
			return withBuffer[[6912 - envelopeSize - mallocHeader]byte](n)
		case size <= 8192-mallocHeader:
			return withBuffer[[8192 - envelopeSize - mallocHeader]byte](n)
		}
	}
	return new(Envelope), make([]byte, n)
}

// withBuffer allocates an Envelope followed by the byte array B (of at least n bytes).
func withBuffer[B any](n int) (*Envelope, []byte) {
	p := new(struct {
		e Envelope
		b B
	})
	return &p.e, unsafe.Slice((*byte)(unsafe.Pointer(&p.b)), n)[:n:n] //nolint:gosec // G103: B is a byte array of at least n bytes
}
