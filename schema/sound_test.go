package schema_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	bqpulsar "github.com/babelqueue/babelqueue-go-pulsar/pulsar"
	"github.com/babelqueue/babelqueue-go-pulsar/schema"
)

// A schema that can validate no value is refused at setup, with the path of its cycle: it
// would otherwise dead-letter every message of its URN as invalid data.
func TestSchemaThatCannotValidateAnythingIsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		schemas map[string]string
		want    []string
	}{
		"self $ref":         {map[string]string{"urn:a": `{"$ref":"#"}`}, []string{"cycle", "urn:a# → urn:a#"}},
		"a → b → a":         {map[string]string{"urn:a": `{"$ref":"urn:b"}`, "urn:b": `{"$ref":"urn:a"}`}, []string{"cycle", "urn:a# → urn:b# → urn:a#"}},
		"through allOf":     {map[string]string{"urn:a": `{"type":"object","allOf":[{"$ref":"#"}]}`}, []string{"cycle", "urn:a#"}},
		"inside a property": {map[string]string{"urn:a": `{"properties":{"x":{"$ref":"#/properties/x"}}}`}, []string{"cycle", "urn:a#/properties/x"}},
		"false":             {map[string]string{"urn:a": `false`}, []string{"accepts no value"}},
		"not anything":      {map[string]string{"urn:a": `{"not":{}}`}, []string{"accepts no value"}},
		"allOf false":       {map[string]string{"urn:a": `{"allOf":[{"type":"object"},false]}`}, []string{"accepts no value"}},
		"anyOf all false":   {map[string]string{"urn:a": `{"anyOf":[false,{"not":true}]}`}, []string{"accepts no value"}},
		"$ref to false":     {map[string]string{"urn:a": `{"$ref":"urn:b"}`, "urn:b": `false`}, []string{"accepts no value"}},
		"oneOf all false":   {map[string]string{"urn:a": `{"oneOf":[false,{"not":{}}]}`}, []string{"accepts no value"}},
		"through anyOf":     {map[string]string{"urn:a": `{"anyOf":[{"$ref":"urn:b"},{"type":"string"}]}`, "urn:b": `{"$ref":"urn:a"}`}, []string{"cycle", "urn:a# → urn:a#/anyOf/0 → urn:b# → urn:a#"}},
		"through oneOf":     {map[string]string{"urn:a": `{"oneOf":[{"type":"string"},{"$ref":"#"}]}`}, []string{"cycle", "urn:a#/oneOf/1"}},
		"through not":       {map[string]string{"urn:a": `{"type":"object","not":{"$ref":"#"}}`}, []string{"cycle", "urn:a#/not"}},
		"through if":        {map[string]string{"urn:a": `{"if":{"$ref":"#"}}`}, []string{"cycle", "urn:a#/if"}},
		"through then":      {map[string]string{"urn:a": `{"if":{"type":"object"},"then":{"$ref":"#"}}`}, []string{"cycle", "urn:a#/then"}},
		"through else":      {map[string]string{"urn:a": `{"if":{"type":"object"},"else":{"$ref":"#"}}`}, []string{"cycle", "urn:a#/else"}},
		"dependentSchemas":  {map[string]string{"urn:a": `{"dependentSchemas":{"x":{"$ref":"#"}}}`}, []string{"cycle", "urn:a#/dependentSchemas/x"}},
	} {
		t.Run(name, func(t *testing.T) {
			raw := map[string][]byte{}
			for urn, s := range tc.schemas {
				raw[urn] = []byte(s)
			}
			_, err := schema.NewMapProvider(raw)
			require.ErrorIs(t, err, schema.ErrSchema)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			if len(tc.schemas) == 1 {
				_, err = schema.Compile("urn:a", raw["urn:a"])
				require.ErrorIs(t, err, schema.ErrSchema)
			}
		})
	}
}

// Recursion that moves into the data is a tree schema, and fine.
func TestRecursiveSchemasThatMoveIntoTheDataCompile(t *testing.T) {
	p, err := schema.NewMapProvider(map[string][]byte{
		"urn:tree": []byte(`{"type":"object","properties":{"children":{"type":"array","items":{"$ref":"#"}}}}`),
		"urn:list": []byte(`{"$ref":"urn:node"}`),
		"urn:node": []byte(`{"type":"object","properties":{"next":{"$ref":"urn:node"}},"anyOf":[{"required":["v"]},{"not":{"type":"object"}}]}`),
	})
	require.NoError(t, err)
	tree, _, err := p.Schema("urn:tree")
	require.NoError(t, err)
	require.NoError(t, tree.Validate([]byte(`{"children":[{"children":[]}]}`)))
	list, _, err := p.Schema("urn:list")
	require.NoError(t, err)
	require.NoError(t, list.Validate([]byte(`{"v":1,"next":{"v":2}}`)))
	require.Error(t, list.Validate([]byte(`{"v":1,"next":{}}`)))
}

// manyViolations is data with n properties that each fail the schema
// {"additionalProperties":{"type":"integer"}}, the first names and values long.
func manyViolations(n int) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	long := strings.Repeat("x", 300)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if i < 2*schema.MaxViolations {
			fmt.Fprintf(&b, "%q:%q", fmt.Sprintf("p%05d-%s", i, long), long) // a pointer and a message too long to keep
			continue
		}
		fmt.Fprintf(&b, `"p%05d":"x"`, i)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// TestViolationsAreCapped: a payload with 30,000 violations gives an error that lists the
// first 20 and counts the rest, and a dead-letter copy whose error text is a few KiB.
func TestViolationsAreCapped(t *testing.T) {
	const urn = "urn:babel:many:fails"
	p, err := schema.NewMapProvider(map[string][]byte{urn: []byte(`{"type":"object","additionalProperties":{"type":"integer"}}`)})
	require.NoError(t, err)
	data := manyViolations(30_000)
	s, _, err := p.Schema(urn)
	require.NoError(t, err)
	verr := s.Validate(data)
	vs := violations(t, verr)
	require.Len(t, vs, schema.MaxViolations)
	var ve *schema.ValidationError
	require.ErrorAs(t, verr, &ve)
	assert.Equal(t, 30_000, ve.Total)
	assert.Contains(t, verr.Error(), "(30000 violations)")
	assert.Contains(t, verr.Error(), "; and 29980 more")
	assert.Less(t, len(verr.Error()), 16<<10, "the error text is bounded")
	exactly := s.Validate(manyViolations(schema.MaxViolations))
	require.Len(t, violations(t, exactly), schema.MaxViolations)
	assert.NotContains(t, exactly.Error(), "more", "every violation is shown: nothing more to count")
	for _, v := range vs {
		assert.LessOrEqual(t, len(v.Pointer), 256)
		assert.LessOrEqual(t, len(v.Message), 256)
	}

	// The dead-letter copy of the Middleware's outcome.
	env, err := envelope.Make(urn, json.RawMessage(data), envelope.WithQueue("orders"))
	require.NoError(t, err)
	outcome := schema.Middleware(p)(func(context.Context, *envelope.Envelope, apulsar.Message) error {
		t.Error("invalid data reached the handler")
		return nil
	})(context.Background(), env, nil)
	var dl *bqpulsar.DeadLetterError
	require.ErrorAs(t, outcome, &dl)
	cp, err := env.ToDeadLetter(envelope.DeadLetterInfo{Reason: envelope.ReasonFailed, Cause: outcome, Queue: "orders", Attempts: 1}).Encode()
	require.NoError(t, err)
	back, err := envelope.Decode(cp)
	require.NoError(t, err)
	require.NotNil(t, back.DeadLetter.Error)
	assert.Less(t, len(*back.DeadLetter.Error), 64<<10, "the copy's violation text stays far below the message-size limit")
	t.Logf("payload %d bytes, dead-letter error %d bytes", len(data), len(*back.DeadLetter.Error))
}
