package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

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

// ValidationError is the refusal of data that fails its URN's schema: it lists every
// violation found. It is returned by [Schema.Validate], [Publisher.Publish] and its
// variants, and carried by the dead-letter outcome of [Middleware].
type ValidationError struct {
	// URN is the message URN whose schema the data fails.
	URN string
	// Violations lists every violation, ordered by pointer, then keyword.
	Violations []Violation
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "schema: data of %s fails its schema (%d violation", e.URN, len(e.Violations))
	if len(e.Violations) != 1 {
		b.WriteByte('s')
	}
	b.WriteString(")")
	for i, v := range e.Violations {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(v.String())
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

// Compile compiles the schema text raw for urn. Errors wrap [ErrSchema].
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
	sort.SliceStable(out.Violations, func(i, j int) bool {
		a, b := out.Violations[i], out.Violations[j]
		if a.Pointer != b.Pointer {
			return a.Pointer < b.Pointer
		}
		return a.Keyword < b.Keyword
	})
	return out
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
