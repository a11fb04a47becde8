package envelope

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Decode parses payload strictly and losslessly (rules 1–4 and 7 of CONTRACT §1.3). It
// returns a *[PoisonError] (matching [ErrPoison]) when the payload is not valid UTF-8, not
// exactly one JSON object, or a known member has the wrong JSON type. It does not check
// rules 5–6 (URN, schema version, data, trace_id): use [Classify] to decide acceptance.
//
// Decode copies payload once; the caller may reuse its buffer afterwards.
func Decode(payload []byte) (*Envelope, error) {
	if !utf8.Valid(payload) {
		return nil, poison(RuleUTF8, "", "payload is not valid UTF-8 (first invalid byte at "+
			strconv.Itoa(firstInvalidUTF8(payload))+")")
	}
	d := decoder{s: string(payload), e: &Envelope{}}
	if err := d.frame(); err != nil {
		return nil, err
	}
	return d.e, nil
}

// Classify decides whether payload is acceptable (all rules of CONTRACT §1.3). A nil error
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

// decoder is a single-pass parser over its own string copy of the payload. Decoded strings
// without escapes and unknown members without whitespace are substrings of that copy, so a
// typical envelope costs three allocations: the copy, the Envelope and its Data bytes.
type decoder struct {
	s     string
	e     *Envelope
	depth int // nesting depth of the object whose member is being decoded (frame = 1)
}

func (d *decoder) frame() *PoisonError {
	s := d.s
	i := skipWS(s, 0)
	switch {
	case i >= len(s):
		return poison(RuleSingleObject, "", "payload is empty or only whitespace")
	case strings.HasPrefix(s[i:], "\uFEFF"):
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
		return i + 1, nil
	}
	for {
		if i >= len(s) || s[i] != '"' {
			return i, syntaxPoison(prefix, errExpect(s, i, "a string key"))
		}
		kEnd, kEsc, serr := scanString(s, i)
		if serr != nil {
			return i, syntaxPoison(prefix, serr)
		}
		key := s[i:kEnd]
		name := key[1 : len(key)-1]
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
			i, err = d.metaMember(i, key, name)
		case levelDeadLetter:
			i, err = d.deadLetterMember(i, key, name)
		default:
			d.depth = 1
			i, err = d.topMember(i, key, name)
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

func (d *decoder) topMember(i int, key, name string) (int, *PoisonError) {
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
			e.unknown = addMember(e.unknown, member{key: key, name: name, raw: d.s[start:i]})
		}
	case "data":
		if d.s[i] != '{' {
			return d.typeErr(i, "/data", "an object")
		}
		end, ws, serr := scanValue(d.s, i, d.depth)
		if serr != nil {
			return end, syntaxPoison("/data", serr)
		}
		if ws {
			e.Data = appendCompact(make([]byte, 0, end-i), d.s[i:end])
		} else {
			e.Data = []byte(d.s[i:end])
		}
		i = end
	case "meta":
		if d.s[i] != '{' {
			return d.typeErr(i, "/meta", "an object")
		}
		e.Meta = Meta{} // a duplicate meta replaces the earlier one entirely
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
		return d.object(i, levelDeadLetter, "/dead_letter")
	case "timestamp":
		return d.forbidden(i, "/timestamp")
	default:
		return d.unknown(i, key, name, "", &e.unknown)
	}
	return i, err
}

func (d *decoder) metaMember(i int, key, name string) (int, *PoisonError) {
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
		return d.unknown(i, key, name, "/meta", &m.unknown)
	}
	return i, err
}

func (d *decoder) deadLetterMember(i int, key, name string) (int, *PoisonError) {
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
		return d.unknown(i, key, name, "/dead_letter", &dl.unknown)
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
	v := d.s[i+1 : end-1]
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
	tok := s[i:end]
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

// unknown validates the value of an unknown member and keeps it verbatim (compacted).
func (d *decoder) unknown(i int, key, name, prefix string, list *[]member) (int, *PoisonError) {
	end, ws, serr := scanValue(d.s, i, d.depth)
	if serr != nil {
		return end, syntaxPoison(prefix+"/"+escapePointer(name), serr)
	}
	raw := d.s[i:end]
	if ws {
		raw = string(appendCompact(make([]byte, 0, end-i), raw))
	}
	*list = addMember(*list, member{key: key, name: name, raw: raw})
	return end, nil
}

// addMember appends m, or, for a duplicate key, replaces the earlier value in place: the
// last value wins and the key keeps its first position.
func addMember(list []member, m member) []member {
	for k := range list {
		if list[k].name == m.name {
			list[k] = m
			return list
		}
	}
	return append(list, m)
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

// field turns the pointer of a known member into its dotted name, e.g. meta.schema_version.
func field(ptr string) string { return strings.ReplaceAll(ptr[1:], "/", ".") }
