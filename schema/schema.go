package schema

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// ErrInvalid is wrapped by every [*ValidationError]: errors.Is(err, ErrInvalid) tells data
// that fails its schema from other failures.
var ErrInvalid = errors.New("schema: invalid data")

// ErrSchema is wrapped by the errors of a schema that cannot be read or compiled, and of a
// provider source (a directory, a registry.json) that is malformed.
var ErrSchema = errors.New("schema: bad schema")

// ErrInvalidOption is wrapped by the errors of a constructor given a bad argument.
var ErrInvalidOption = errors.New("schema: invalid option")

// Violation is one way data fails its schema.
type Violation struct {
	// Pointer is the JSON pointer (RFC 6901) of the failing value within data: "" for data
	// itself, "/order_id", "/items/0/sku".
	Pointer string
	// Keyword is the JSON pointer of the failing keyword within its schema document (the
	// URN's schema, or the one it refers to with $ref), such as
	// "/properties/order_id/minimum".
	Keyword string
	// Message says what is wrong, in English.
	Message string
}

// String returns "pointer: message", with "(root)" for the empty pointer.
func (v Violation) String() string {
	p := v.Pointer
	if p == "" {
		p = "(root)"
	}
	return p + ": " + v.Message
}

// MaxViolations is how many violations a [*ValidationError] keeps: the first ones, by
// pointer, keyword and message. Total counts them all.
const MaxViolations = 20

// maxViolationText bounds the pointer and the message of a kept violation, in bytes; a
// longer one is cut at a rune boundary and ends with "…". With [MaxViolations], it bounds
// the error text (and a dead-letter copy's error) to a few KiB, whatever the data.
const maxViolationText = 256

// ValidationError is the refusal of data that fails its URN's schema: it lists the first
// [MaxViolations] violations found, and Total counts them all. It is returned by
// [Schema.Validate], [Publisher.Publish] and its variants, and carried by the dead-letter
// outcome of [Middleware]. Its text is bounded (see [MaxViolations]), so a dead-letter copy
// stays small however many ways the data fails.
type ValidationError struct {
	// URN is the message URN whose schema the data fails.
	URN string
	// Violations lists the first violations (at most [MaxViolations]), ordered by pointer,
	// then keyword, then message; a pointer or message longer than 256 bytes is cut short
	// with "…".
	Violations []Violation
	// Total is the number of violations found, Violations included; 0 means
	// len(Violations).
	Total int
}

// total returns the number of violations found.
func (e *ValidationError) total() int { return max(e.Total, len(e.Violations)) }

func (e *ValidationError) Error() string {
	var b strings.Builder
	n := e.total()
	fmt.Fprintf(&b, "schema: data of %s fails its schema (%d violation", e.URN, n)
	if n != 1 {
		b.WriteByte('s')
	}
	b.WriteString(")")
	for i, v := range e.Violations {
		if i == MaxViolations {
			break
		}
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(v.String())
	}
	if shown := min(len(e.Violations), MaxViolations); n > shown {
		fmt.Fprintf(&b, "; and %d more", n-shown)
	}
	return b.String()
}

// Unwrap returns [ErrInvalid].
func (*ValidationError) Unwrap() error { return ErrInvalid }

// Schema is a compiled JSON Schema for the data of one URN. It is safe for concurrent use.
type Schema struct {
	urn string
	s   *jsonschema.Schema
}

// URN returns the URN the schema is registered for.
func (s *Schema) URN() string { return s.urn }

// Compile compiles the schema text raw for urn. It may "$ref" only within itself: a
// relative "$ref" (a path, not only a fragment) is refused, as in [NewMapProvider]. Errors
// wrap [ErrSchema].
func Compile(urn string, raw []byte) (*Schema, error) {
	c := newCompiler()
	loc := urn
	if err := addResource(c, loc, raw); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSchema, urn, err)
	}
	return compile(c, urn, loc)
}

func compile(c *jsonschema.Compiler, urn, loc string) (*Schema, error) {
	s, err := c.Compile(loc)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSchema, urn, err)
	}
	if err := checkSound(s); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrSchema, urn, err)
	}
	return &Schema{urn: urn, s: s}, nil
}

// newCompiler returns a compiler that uses 2020-12 for schemas without "$schema" and
// loads nothing it was not given.
func newCompiler() *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refusingLoader{})
	return c
}

// refusingLoader refuses every URL: schemas reach only the resources they were given.
type refusingLoader struct{}

func (refusingLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%s is not a schema of this provider (nothing is loaded from elsewhere)", url)
}

func addResource(c *jsonschema.Compiler, loc string, raw []byte) error {
	doc, err := decodeJSON(raw)
	if err != nil {
		return err
	}
	if err := checkRelativeRefs(doc, loc); err != nil {
		return err
	}
	if err := c.AddResource(loc, doc); err != nil {
		return fmt.Errorf("add schema: %w", err)
	}
	return nil
}

// decodeJSON decodes exactly one JSON value, numbers kept exact.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("not JSON: text after the value")
	}
	return v, nil
}

// Validate checks data (the JSON text of an envelope's data block) against the schema. It
// returns nil when data is valid, a [*ValidationError] listing every violation when it is
// not (text that is not JSON is one violation at the root).
func (s *Schema) Validate(data []byte) error {
	v, err := decodeJSON(data)
	if err != nil {
		return &ValidationError{URN: s.urn, Violations: []Violation{{Message: err.Error()}}}
	}
	return s.ValidateValue(v)
}

// ValidateValue checks an already decoded JSON value (as encoding/json decodes into any;
// numbers as float64 or json.Number) against the schema, like [Schema.Validate].
func (s *Schema) ValidateValue(v any) error {
	err := s.s.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &ValidationError{URN: s.urn, Violations: []Violation{{Message: err.Error()}}}
	}
	out := &ValidationError{URN: s.urn}
	collect(ve, &out.Violations)
	if len(out.Violations) == 0 {
		out.Violations = append(out.Violations, Violation{Message: ve.Error()})
	}
	// Pointer and keyword may tie (one keyword path in two schema documents): the message
	// orders those, so the order is the data's and the schema's, not the validator's.
	slices.SortFunc(out.Violations, func(a, b Violation) int {
		return cmp.Or(strings.Compare(a.Pointer, b.Pointer), strings.Compare(a.Keyword, b.Keyword),
			strings.Compare(a.Message, b.Message))
	})
	out.Total = len(out.Violations)
	if len(out.Violations) > MaxViolations {
		out.Violations = slices.Clip(out.Violations[:MaxViolations])
	}
	for i := range out.Violations {
		v := &out.Violations[i]
		v.Pointer, v.Message = cut(v.Pointer), cut(v.Message)
	}
	return out
}

// cut bounds s to maxViolationText bytes, at a rune boundary, marking a cut with "…".
func cut(s string) string {
	if len(s) <= maxViolationText {
		return s
	}
	n := maxViolationText - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

var printer = message.NewPrinter(language.English)

// collect appends the leaves of the error tree: the violations themselves, not the
// "fails the schema" and "$ref" nodes that group them.
func collect(e *jsonschema.ValidationError, out *[]Violation) {
	if len(e.Causes) > 0 {
		for _, c := range e.Causes {
			collect(c, out)
		}
		return
	}
	switch e.ErrorKind.(type) {
	case *kind.Schema, *kind.Reference:
		return
	}
	*out = append(*out, Violation{
		Pointer: pointer(e.InstanceLocation),
		Keyword: keywordLocation(e),
		Message: e.ErrorKind.LocalizedString(printer),
	})
}

// keywordLocation is the pointer of the failing keyword within its schema document: the
// fragment of the schema's URL followed by the keyword's path.
func keywordLocation(e *jsonschema.ValidationError) string {
	frag := ""
	if i := strings.IndexByte(e.SchemaURL, '#'); i >= 0 {
		frag = e.SchemaURL[i+1:]
	}
	return frag + pointer(e.ErrorKind.KeywordPath())
}

var tokenEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// pointer builds an RFC 6901 JSON pointer from its reference tokens.
func pointer(tokens []string) string {
	if len(tokens) == 0 {
		return ""
	}
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(tokenEscaper.Replace(t))
	}
	return b.String()
}
