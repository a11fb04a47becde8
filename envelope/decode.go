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
// Decode copies payload once (see "Ownership of bytes" in the package doc); the caller may
// reuse its buffer as soon as it returns.
func Decode(payload []byte) (*Envelope, error) {
	if uint64(len(payload)) > maxPayload {
		return nil, poison(RuleSingleObject, "", "payload of "+strconv.Itoa(len(payload))+
			" bytes is larger than the decoder's limit of 4 GiB")
	}
	if !utf8.Valid(payload) {
		return nil, poison(RuleUTF8, "", "payload is not valid UTF-8 (first invalid byte at "+
			strconv.Itoa(firstInvalidUTF8(payload))+")")
	}
	e, buf := newEnvelope(len(payload))
	copy(buf, payload)
	d := decoder{s: buf, e: e}
	if err := d.frame(); err != nil {
		return nil, err
	}
	return e, nil
}

// Classify decides whether payload is acceptable (all the acceptance rules of the package doc). A nil error
// means the envelope may be handled; otherwise the error is a *[PoisonError] naming the
// failed rule and the envelope is nil. It is a pure function.
func Classify(payload []byte) (*Envelope, error) {
	e, err := Decode(payload)
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

// decoder is a single-pass parser over the envelope's own copy of the payload. Decoded
// strings without escapes are substrings of that copy, Data is a sub-slice of it, and
// whitespace inside data and unknown members is removed in place; the unknown members of
// an object are written out as one string when it closes. A typical envelope therefore
// costs one allocation (see newEnvelope), plus one per object with unknown members.
//
// Regions of s under a string returned by sub are never written afterwards; the only writes
// are the in-place compaction of a value that has just been scanned and that no string
// covers (compact).
type decoder struct {
	s     []byte
	e     *Envelope
	depth int // nesting depth of the object whose member is being decoded (frame = 1)
	// key is the raw text of the key being decoded (quotes included) and keyEscaped whether
	// it contains escapes.
	key        span
	keyEscaped bool
	// tables collect the unknown members of each level until the object closes.
	tables [3]memberTable
}

// span is the offsets [start, end) of a text in the decoder's buffer (a payload is shorter
// than maxPayload).
type span struct{ start, end uint32 }

// maxPayload bounds the payload so that offsets fit a span.
const maxPayload = 1<<32 - 1

func mkSpan(start, end int) span { return span{uint32(start), uint32(end)} } //nolint:gosec // G115: offsets < maxPayload

// memberTable holds the unknown members of one object while it is decoded, as offsets into
// the buffer (no pointers, so the garbage collector does not scan a long list), in the order
// of first occurrence. When the object closes they are written out as one string.
type memberTable struct {
	members []tableMember
	index   memberIndex
	// escaped holds the decoded names of members whose first key was spelled with escapes,
	// by position; the other names are the key text without quotes.
	escaped map[int]string
}

type tableMember struct {
	name     span // the first occurrence's key text without quotes (unused when escaped)
	key, raw span // the last occurrence's key text (quotes included) and compact value
}

// sub returns s[i:j] as a string sharing the decoder's buffer.
func (d *decoder) sub(i, j int) string {
	if j <= i {
		return ""
	}
	return unsafe.String(&d.s[i], j-i) //nolint:gosec // G103: the region is never written again (see decoder)
}

// compact removes insignificant whitespace from the scanned value s[i:end] in place when ws
// is set and returns the end of the compact text. Writing never overtakes reading, so the
// text is compacted correctly; nothing else covers the region.
func (d *decoder) compact(i, end int, ws bool) int {
	if !ws {
		return end
	}
	return i + len(appendCompact(d.s[i:i], d.s[i:end]))
}

func (d *decoder) frame() *PoisonError {
	s := d.s
	i := skipWS(s, 0)
	switch {
	case i >= len(s):
		return poison(RuleSingleObject, "", "payload is empty or only whitespace")
	case bytes.HasPrefix(s[i:], bom):
		return poison(RuleSingleObject, "", "payload starts with a byte order mark")
	case s[i] != '{':
		if _, _, err := scanValue(s, i, 0); err != nil {
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
		d.closeObject(lvl)
		return i + 1, nil
	}
	for count := 1; ; count++ {
		if count > MaxMembers {
			return i, poison(RuleMembers, prefix, objectName(prefix)+" has more than "+
				strconv.Itoa(MaxMembers)+" members (MaxMembers)")
		}
		if i >= len(s) || s[i] != '"' {
			return i, syntaxPoison(prefix, errExpect(s, i, "a string key"))
		}
		kEnd, kEsc, serr := scanString(s, i)
		if serr != nil {
			return i, syntaxPoison(prefix, serr)
		}
		d.key = mkSpan(i, kEnd)
		d.keyEscaped = kEsc
		name := d.sub(i+1, kEnd-1)
		if kEsc {
			name = unescape(name)
		}
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
		switch lvl {
		case levelMeta:
			i, err = d.metaMember(i, name)
		case levelDeadLetter:
			i, err = d.deadLetterMember(i, name)
		default:
			d.depth = 1
			i, err = d.topMember(i, name)
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
			d.closeObject(lvl)
			return i + 1, nil
		default:
			return i, syntaxPoison(prefix, errExpect(s, i, "',' or '}' after an object member"))
		}
	}
}

func (d *decoder) topMember(i int, name string) (int, *PoisonError) {
	e := d.e
	var err *PoisonError
	switch name {
	case "job":
		e.Job, i, err = d.str(i, "/job")
	case "trace_id":
		e.TraceID, i, err = d.str(i, "/trace_id")
	case "urn":
		start := i
		e.urn, i, err = d.str(i, "/urn")
		if err == nil {
			d.addMember(levelTop, name, mkSpan(start, i))
		}
	case "data":
		if d.s[i] != '{' {
			return d.typeErr(i, "/data", "an object")
		}
		end, ws, serr := scanValue(d.s, i, d.depth)
		if serr != nil {
			return end, syntaxPoison("/data", serr)
		}
		// A full slice expression: appending to Data reallocates instead of overwriting
		// the text after it.
		n := d.compact(i, end, ws)
		e.Data = d.s[i:n:n]
		i = end
	case "meta":
		if d.s[i] != '{' {
			return d.typeErr(i, "/meta", "an object")
		}
		e.Meta = Meta{} // a duplicate meta replaces the earlier one entirely
		d.tables[levelMeta] = memberTable{}
		return d.object(i, levelMeta, "/meta")
	case "attempts":
		var n int64
		n, i, err = d.integer(i, "/attempts", true)
		e.Attempts = int(max(n, 0))
	case "dead_letter":
		if d.s[i] != '{' {
			return d.typeErr(i, "/dead_letter", "an object")
		}
		e.DeadLetter = &DeadLetter{}
		d.tables[levelDeadLetter] = memberTable{}
		return d.object(i, levelDeadLetter, "/dead_letter")
	case "timestamp":
		return d.forbidden(i, "/timestamp")
	default:
		return d.unknown(i, name, levelTop)
	}
	return i, err
}

func (d *decoder) metaMember(i int, name string) (int, *PoisonError) {
	m := &d.e.Meta
	var err *PoisonError
	var n int64
	switch name {
	case "id":
		m.ID, i, err = d.str(i, "/meta/id")
	case "queue":
		m.Queue, i, err = d.str(i, "/meta/queue")
	case "lang":
		m.Lang, i, err = d.str(i, "/meta/lang")
	case "schema_version":
		n, i, err = d.integer(i, "/meta/schema_version", true)
		m.SchemaVersion = int(n)
	case "created_at":
		m.CreatedAt, i, err = d.integer(i, "/meta/created_at", false)
	case "max_retries", "attempts", "source", "ts":
		return d.forbidden(i, "/meta/"+name)
	default:
		return d.unknown(i, name, levelMeta)
	}
	return i, err
}

func (d *decoder) deadLetterMember(i int, name string) (int, *PoisonError) {
	dl := d.e.DeadLetter
	var err *PoisonError
	var n int64
	switch name {
	case "reason":
		var r string
		r, i, err = d.str(i, "/dead_letter/reason")
		dl.Reason = Reason(r)
	case "error":
		dl.Error, i, err = d.nullableStr(i, "/dead_letter/error")
	case "exception":
		dl.Exception, i, err = d.nullableStr(i, "/dead_letter/exception")
	case "failed_at":
		dl.FailedAt, i, err = d.integer(i, "/dead_letter/failed_at", false)
	case "original_queue":
		dl.OriginalQueue, i, err = d.str(i, "/dead_letter/original_queue")
	case "attempts":
		n, i, err = d.integer(i, "/dead_letter/attempts", true)
		dl.Attempts = int(n)
	case "lang":
		dl.Lang, i, err = d.str(i, "/dead_letter/lang")
	default:
		return d.unknown(i, name, levelDeadLetter)
	}
	return i, err
}

// str decodes the string member at s[i], or fails with RuleType.
func (d *decoder) str(i int, ptr string) (string, int, *PoisonError) {
	if i >= len(d.s) || d.s[i] != '"' {
		end, err := d.typeErr(i, ptr, "a string")
		return "", end, err
	}
	end, esc, serr := scanString(d.s, i)
	if serr != nil {
		return "", end, syntaxPoison(ptr, serr)
	}
	v := d.sub(i+1, end-1)
	if esc {
		v = unescape(v)
	}
	return v, end, nil
}

func (d *decoder) nullableStr(i int, ptr string) (*string, int, *PoisonError) {
	if i < len(d.s) && d.s[i] == 'n' {
		end, _, serr := scanLiteral(d.s, i, "null")
		if serr != nil {
			return nil, end, syntaxPoison(ptr, serr)
		}
		return nil, end, nil
	}
	v, end, err := d.str(i, ptr)
	if err != nil {
		return nil, end, err
	}
	return &v, end, nil
}

// integer decodes the JSON integer member at s[i] that must fit an int64 (or an int when
// asInt is set), or fails with RuleType (strings, fractions, exponents, overflow).
func (d *decoder) integer(i int, ptr string, asInt bool) (int64, int, *PoisonError) {
	s := d.s
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
	end, _, serr := scanValue(d.s, i, d.depth)
	if serr != nil {
		return end, syntaxPoison(ptr, serr)
	}
	return end, poison(RuleType, ptr, field(ptr)+" must be "+want+", got "+kindOf(d.s[i]))
}

// forbidden validates and skips the value of a forbidden key and records a warning.
func (d *decoder) forbidden(i int, ptr string) (int, *PoisonError) {
	end, _, serr := scanValue(d.s, i, d.depth)
	if serr != nil {
		return end, syntaxPoison(ptr, serr)
	}
	for _, w := range d.e.warnings {
		if w.Pointer == ptr {
			return end, nil
		}
	}
	d.e.warnings = append(d.e.warnings, Warning{
		Pointer: ptr,
		Message: "forbidden key " + ptr + " ignored and dropped on re-encode",
	})
	return end, nil
}

// unknown validates the value of an unknown member and keeps it verbatim (compacted in
// place) in the member table of lvl.
func (d *decoder) unknown(i int, name string, lvl level) (int, *PoisonError) {
	end, ws, serr := scanValue(d.s, i, d.depth)
	if serr != nil {
		return end, syntaxPoison(levelPointer[lvl]+"/"+escapePointer(name), serr)
	}
	d.addMember(lvl, name, mkSpan(i, d.compact(i, end, ws)))
	return end, nil
}

// levelPointer is the JSON pointer of the object of each level.
var levelPointer = [...]string{levelTop: "", levelMeta: "/meta", levelDeadLetter: "/dead_letter"}

// memberName returns the decoded name of member k of t.
func (d *decoder) memberName(t *memberTable, k int) string {
	if name, ok := t.escaped[k]; ok {
		return name
	}
	m := &t.members[k]
	return d.sub(int(m.name.start), int(m.name.end))
}

// addMember adds the member with the current key (d.key), decoded name and value raw to
// the table of lvl, or, for a duplicate name, replaces the earlier key text and value in
// place: the last value wins and the key keeps its first position. Short tables are searched
// linearly; a longer one gets an index, so each call is O(1) expected.
func (d *decoder) addMember(lvl level, name string, raw span) {
	t := &d.tables[lvl]
	m := tableMember{name: span{d.key.start + 1, d.key.end - 1}, key: d.key, raw: raw}
	if t.index.slots == nil {
		for k := range t.members {
			if d.memberName(t, k) == name {
				t.members[k].key, t.members[k].raw = m.key, m.raw
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
			t.members[k].key, t.members[k].raw = m.key, m.raw
			return
		}
	}
}

// appendMember appends a new member to t, doubling a full list (append grows a large slice
// by only 1.25×, which copies a long list about five times over).
func (d *decoder) appendMember(t *memberTable, m tableMember, name string) {
	if len(t.members) == cap(t.members) {
		t.members = slices.Grow(t.members, max(len(t.members), 4))
	}
	if d.keyEscaped {
		if t.escaped == nil {
			t.escaped = map[int]string{}
		}
		t.escaped[len(t.members)] = name
	}
	t.members = append(t.members, m)
}

// closeObject writes the unknown members of the object of lvl that just closed into the
// envelope, as their canonical text: `,<key>:<value>` for each, in order.
func (d *decoder) closeObject(lvl level) {
	t := &d.tables[lvl]
	if len(t.members) == 0 {
		return
	}
	n := 0
	for _, m := range t.members {
		n += 2 + int(m.key.end-m.key.start) + int(m.raw.end-m.raw.start)
	}
	var b strings.Builder
	b.Grow(n)
	for _, m := range t.members {
		b.WriteByte(',')
		b.Write(d.s[m.key.start:m.key.end])
		b.WriteByte(':')
		b.Write(d.s[m.raw.start:m.raw.end])
	}
	switch lvl {
	case levelMeta:
		d.e.Meta.unknown = b.String()
	case levelDeadLetter:
		d.e.DeadLetter.unknown = b.String()
	default:
		d.e.unknown = b.String()
	}
	*t = memberTable{}
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

// The envelope of a small payload and its copy share one allocation: a struct holding the
// Envelope and a byte array sized so that the struct fills one of the runtime's size
// classes (512 B to 8 KiB; above 512 B an object with pointers carries an 8-byte malloc
// header). The strings and Data of the envelope point into the array, so they keep it alive
// exactly as long as the envelope's own memory. A larger payload gets a separate buffer (two
// allocations, negligible beside its scan).
const (
	envelopeSize = unsafe.Sizeof(Envelope{})
	mallocHeader = 8
)

type (
	envelope512 struct {
		e Envelope
		b [512 - envelopeSize]byte
	}
	envelope640 struct {
		e Envelope
		b [640 - envelopeSize - mallocHeader]byte
	}
	envelope768 struct {
		e Envelope
		b [768 - envelopeSize - mallocHeader]byte
	}
	envelope1024 struct {
		e Envelope
		b [1024 - envelopeSize - mallocHeader]byte
	}
	envelope1280 struct {
		e Envelope
		b [1280 - envelopeSize - mallocHeader]byte
	}
	envelope1536 struct {
		e Envelope
		b [1536 - envelopeSize - mallocHeader]byte
	}
	envelope2048 struct {
		e Envelope
		b [2048 - envelopeSize - mallocHeader]byte
	}
	envelope2688 struct {
		e Envelope
		b [2688 - envelopeSize - mallocHeader]byte
	}
	envelope3072 struct {
		e Envelope
		b [3072 - envelopeSize - mallocHeader]byte
	}
	envelope4096 struct {
		e Envelope
		b [4096 - envelopeSize - mallocHeader]byte
	}
	envelope4864 struct {
		e Envelope
		b [4864 - envelopeSize - mallocHeader]byte
	}
	envelope6144 struct {
		e Envelope
		b [6144 - envelopeSize - mallocHeader]byte
	}
	envelope8192 struct {
		e Envelope
		b [8192 - envelopeSize - mallocHeader]byte
	}
)

// newEnvelope returns a zero Envelope and an n-byte buffer for the copy of its payload.
func newEnvelope(n int) (*Envelope, []byte) {
	switch {
	case n <= 512-int(envelopeSize):
		p := new(envelope512)
		return &p.e, p.b[:n:n]
	case n <= 640-int(envelopeSize)-mallocHeader:
		p := new(envelope640)
		return &p.e, p.b[:n:n]
	case n <= 768-int(envelopeSize)-mallocHeader:
		p := new(envelope768)
		return &p.e, p.b[:n:n]
	case n <= 1024-int(envelopeSize)-mallocHeader:
		p := new(envelope1024)
		return &p.e, p.b[:n:n]
	case n <= 1280-int(envelopeSize)-mallocHeader:
		p := new(envelope1280)
		return &p.e, p.b[:n:n]
	case n <= 1536-int(envelopeSize)-mallocHeader:
		p := new(envelope1536)
		return &p.e, p.b[:n:n]
	case n <= 2048-int(envelopeSize)-mallocHeader:
		p := new(envelope2048)
		return &p.e, p.b[:n:n]
	case n <= 2688-int(envelopeSize)-mallocHeader:
		p := new(envelope2688)
		return &p.e, p.b[:n:n]
	case n <= 3072-int(envelopeSize)-mallocHeader:
		p := new(envelope3072)
		return &p.e, p.b[:n:n]
	case n <= 4096-int(envelopeSize)-mallocHeader:
		p := new(envelope4096)
		return &p.e, p.b[:n:n]
	case n <= 4864-int(envelopeSize)-mallocHeader:
		p := new(envelope4864)
		return &p.e, p.b[:n:n]
	case n <= 6144-int(envelopeSize)-mallocHeader:
		p := new(envelope6144)
		return &p.e, p.b[:n:n]
	case n <= 8192-int(envelopeSize)-mallocHeader:
		p := new(envelope8192)
		return &p.e, p.b[:n:n]
	}
	return new(Envelope), make([]byte, n)
}
