package schema_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
	"github.com/babelqueue/babelqueue-go-pulsar/schema"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

const orderURN = "urn:babel:orders:created"

// orderSchema is a draft-07 schema for order data.
const orderSchema = `{
  "$schema": "http://json-schema.org/draft-07/schema#",
  "type": "object",
  "required": ["order_id"],
  "properties": {
    "order_id": {"type": "integer", "minimum": 1},
    "amount": {"type": "number", "minimum": 0},
    "currency": {"enum": ["USD", "EUR", "TRY"]},
    "lines": {"type": "array", "items": {"type": "object", "required": ["sku"]}}
  },
  "additionalProperties": false
}`

func compileOrder(t *testing.T) *schema.Schema {
	t.Helper()
	s, err := schema.Compile(orderURN, []byte(orderSchema))
	require.NoError(t, err)
	return s
}

func violations(t *testing.T, err error) []schema.Violation {
	t.Helper()
	require.ErrorIs(t, err, schema.ErrInvalid)
	var ve *schema.ValidationError
	require.ErrorAs(t, err, &ve)
	assert.NotEmpty(t, ve.URN)
	return ve.Violations
}

func TestValidateValidAndInvalid(t *testing.T) {
	s := compileOrder(t)
	assert.Equal(t, orderURN, s.URN())
	for _, ok := range []string{`{"order_id":1042}`, `{"order_id":1042,"amount":99.9,"currency":"USD"}`, `{"order_id": 1.0}`} {
		require.NoError(t, s.Validate([]byte(ok)), ok)
	}
	for _, bad := range []string{
		`{"amount":10}`, `{"order_id":"x"}`, `{"order_id":1,"extra":true}`,
		`{"order_id":1,"currency":"GBP"}`, `{"order_id":0}`, `[]`, `{"order_id":1.5}`,
	} {
		require.Error(t, s.Validate([]byte(bad)), bad)
	}
}

func TestEveryViolationIsListed(t *testing.T) {
	s := compileOrder(t)
	err := s.Validate([]byte(`{"order_id":0,"currency":"GBP","extra":1,"lines":[{"sku":"a"},{"qty":2}]}`))
	vs := violations(t, err)
	ptrs := map[string]string{}
	for _, v := range vs {
		ptrs[v.Pointer] = v.Keyword
		assert.NotEmpty(t, v.Message)
	}
	assert.Equal(t, "/properties/order_id/minimum", ptrs["/order_id"])
	assert.Equal(t, "/properties/currency/enum", ptrs["/currency"])
	assert.Equal(t, "/additionalProperties", ptrs[""])
	assert.Equal(t, "/properties/lines/items/required", ptrs["/lines/1"])
	assert.Len(t, vs, 4, "%v", vs)
	// Ordered by pointer, the root first; the first one after ": ", the others after "; ".
	assert.Equal(t, "schema: data of "+orderURN+" fails its schema (4 violations): "+
		"(root): additional properties 'extra' not allowed; "+
		"/currency: value must be one of 'USD', 'EUR', 'TRY'; "+
		"/lines/1: missing property 'sku'; "+
		"/order_id: minimum: got 0, want 1", err.Error())
}

// Violations are ordered by pointer, then by keyword, whatever order the validator finds
// them in: it finds minimum before maximum, and its keyword order is not the pointers'.
func TestViolationsAreOrderedByPointerThenKeyword(t *testing.T) {
	s, err := schema.Compile("urn:babel:a:b", []byte(`{
	  "properties": {"a": {"type": "integer"}, "n": {"multipleOf": 7, "minimum": 100, "maximum": 1}},
	  "additionalProperties": {"type": "integer"}
	}`))
	require.NoError(t, err)
	vs := violations(t, s.Validate([]byte(`{"z":"x","n":50,"a":"x"}`)))
	var got []string
	for _, v := range vs {
		got = append(got, v.Pointer+" "+v.Keyword)
	}
	assert.Equal(t, []string{
		"/a /properties/a/type",
		"/n /properties/n/maximum",
		"/n /properties/n/minimum",
		"/n /properties/n/multipleOf",
		"/z /additionalProperties/type",
	}, got)
}

// Two violations may share pointer and keyword: the same keyword path in two schema
// documents, here "/minimum" in the URN's schema and in the one it refers to. They are
// ordered by message, so the text (and which violations are kept) does not depend on the
// order the validator visits the documents in: it visits urn:a's own minimum first.
func TestViolationsOfOneKeywordAreOrderedByMessage(t *testing.T) {
	p, err := schema.NewMapProvider(map[string][]byte{
		"urn:a": []byte(`{"minimum":5,"allOf":[{"$ref":"urn:m"}]}`),
		"urn:m": []byte(`{"minimum":10}`),
	})
	require.NoError(t, err)
	s, _, err := p.Schema("urn:a")
	require.NoError(t, err)
	assert.Equal(t, []schema.Violation{
		{Pointer: "", Keyword: "/minimum", Message: "minimum: got 1, want 10"},
		{Pointer: "", Keyword: "/minimum", Message: "minimum: got 1, want 5"},
	}, violations(t, s.Validate([]byte(`1`))))
}

func TestPointerTokensAreEscaped(t *testing.T) {
	s, err := schema.Compile("urn:babel:test:keys", []byte(`{"properties":{"a/b~c":{"type":"string"}}}`))
	require.NoError(t, err)
	vs := violations(t, s.Validate([]byte(`{"a/b~c":1}`)))
	require.Len(t, vs, 1)
	assert.Equal(t, "/a~1b~0c", vs[0].Pointer)
}

func TestDataThatIsNotJSON(t *testing.T) {
	s := compileOrder(t)
	for _, bad := range []string{``, `{`, `{"order_id":1} x`} {
		vs := violations(t, s.Validate([]byte(bad)))
		require.Len(t, vs, 1)
		assert.Empty(t, vs[0].Pointer)
		assert.Contains(t, vs[0].Message, "not JSON")
	}
}

func TestDraftSelection(t *testing.T) {
	// Without $schema the draft is 2020-12, where prefixItems applies.
	s, err := schema.Compile("urn:babel:test:tuple", []byte(`{"prefixItems":[{"type":"integer"}]}`))
	require.NoError(t, err)
	require.Error(t, s.Validate([]byte(`["x"]`)))
	// Draft-07 knows no prefixItems: the keyword is ignored there.
	s, err = schema.Compile("urn:babel:test:tuple", []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","prefixItems":[{"type":"integer"}]}`))
	require.NoError(t, err)
	require.NoError(t, s.Validate([]byte(`["x"]`)))
}

func TestBadSchemas(t *testing.T) {
	for name, raw := range map[string]string{
		"not json":        `{`,
		"bad keyword":     `{"type": 12}`,
		"remote ref":      `{"$ref": "https://example.com/s.json"}`,
		"unknown draft":   `{"$schema": "https://example.com/my-draft"}`,
		"trailing text":   `{} {}`,
		"bad minimum":     `{"minimum": "one"}`,
		"bad required":    `{"required": "order_id"}`,
		"file ref escape": `{"$ref": "file:///etc/passwd"}`,
	} {
		_, err := schema.Compile(orderURN, []byte(raw))
		require.ErrorIs(t, err, schema.ErrSchema, name)
	}
}

// "format" is an annotation, not an assertion, as the drafts specify by default.
func TestFormatIsAnAnnotation(t *testing.T) {
	s, err := schema.Compile("urn:babel:test:mail", []byte(`{"type":"string","format":"email"}`))
	require.NoError(t, err)
	require.NoError(t, s.Validate([]byte(`"not an address"`)))
	require.Error(t, s.Validate([]byte(`7`)), "the type still applies")
}

// ValidateValue takes what encoding/json decodes into any, numbers as float64 or
// json.Number, and judges it as Validate judges the text.
func TestValidateValue(t *testing.T) {
	s := compileOrder(t)
	require.NoError(t, s.ValidateValue(map[string]any{"order_id": float64(7)}))
	require.NoError(t, s.ValidateValue(map[string]any{"order_id": json.Number("7")}))
	vs := violations(t, s.ValidateValue(map[string]any{"order_id": json.Number("0")}))
	require.Len(t, vs, 1)
	assert.Equal(t, "/order_id", vs[0].Pointer)
}

// A kept pointer or message longer than 256 bytes is cut at a rune boundary and ends with
// "…".
func TestLongViolationTextIsCutAtARuneBoundary(t *testing.T) {
	s, err := schema.Compile("urn:babel:test:long", []byte(`{"additionalProperties":{"type":"integer"}}`))
	require.NoError(t, err)
	for pad := range 3 { // every offset of a 3-byte rune against the cut
		key := strings.Repeat("k", pad) + strings.Repeat("€", 200)
		data, err := json.Marshal(map[string]string{key: "x"})
		require.NoError(t, err)
		vs := violations(t, s.Validate(data))
		require.Len(t, vs, 1)
		p := vs[0].Pointer
		assert.LessOrEqual(t, len(p), 256)
		assert.Greater(t, len(p), 250, "cut shorter than needed")
		assert.True(t, utf8.ValidString(p), "cut inside a rune: %q", p[len(p)-6:])
		assert.True(t, strings.HasSuffix(p, "…"), "a cut pointer ends with …")
		assert.True(t, strings.HasPrefix(p, "/"+key[:10]))
	}
	// Exactly 256 bytes is not longer than 256: kept whole, no "…".
	key := strings.Repeat("k", 255)
	data, err := json.Marshal(map[string]string{key: "x"})
	require.NoError(t, err)
	vs := violations(t, s.Validate(data))
	require.Len(t, vs, 1)
	assert.Equal(t, "/"+key, vs[0].Pointer, "a pointer of 256 bytes is kept whole")
}

// The text of a ValidationError counts its violations (Total, or the listed ones when Total
// is 0), in the singular for one.
func TestValidationErrorText(t *testing.T) {
	one := &schema.ValidationError{URN: "urn:a", Violations: []schema.Violation{{Message: "bad"}}}
	assert.Equal(t, "schema: data of urn:a fails its schema (1 violation): (root): bad", one.Error())
	two := &schema.ValidationError{URN: "urn:a", Violations: []schema.Violation{{Pointer: "/a", Message: "x"}, {Pointer: "/b", Message: "y"}}}
	assert.Equal(t, "schema: data of urn:a fails its schema (2 violations): /a: x; /b: y", two.Error())
	two.Total = 5
	assert.Equal(t, "schema: data of urn:a fails its schema (5 violations): /a: x; /b: y; and 3 more", two.Error())

	// However many violations it is given, the text shows MaxViolations of them.
	many := &schema.ValidationError{URN: "urn:a"}
	for range schema.MaxViolations + 5 {
		many.Violations = append(many.Violations, schema.Violation{Pointer: "/p", Message: "m"})
	}
	text := many.Error()
	assert.Equal(t, schema.MaxViolations, strings.Count(text, "/p: m"))
	assert.True(t, strings.HasSuffix(text, "; and 5 more"), text)
}
