package schema_test

import (
	"errors"
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/schema"
)

// FuzzParseRegistry: any input is parsed or refused with ErrSchema, never a panic; what is
// accepted has a URN and a path per entry, each URN once.
func FuzzParseRegistry(f *testing.F) {
	f.Add([]byte(`{"schemas":[{"urn":"urn:babel:orders:created","schema":"schemas/orders-created.json","owner":"orders","status":"active"}]}`))
	f.Add([]byte(`{"schemas":[]}`))
	f.Add([]byte(`{"schemas":[{"urn":"a","schema":"b"},{"urn":"a","schema":"c"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := schema.ParseRegistry(data)
		if err != nil {
			if !errors.Is(err, schema.ErrSchema) {
				t.Fatalf("error %v does not wrap ErrSchema", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, e := range entries {
			if e.URN == "" || e.Schema == "" || seen[e.URN] {
				t.Fatalf("accepted a bad entry %+v", e)
			}
			seen[e.URN] = true
		}
	})
}

// FuzzCompileAndValidate: any schema text compiles or is refused with ErrSchema; a compiled
// schema validates any data without panicking, answering nil or ErrInvalid.
func FuzzCompileAndValidate(f *testing.F) {
	f.Add([]byte(orderSchema), []byte(`{"order_id":1}`))
	f.Add([]byte(`{"type":"object","required":["a"]}`), []byte(`{"b":1}`))
	f.Add([]byte(`{"$ref":"#/$defs/x","$defs":{"x":{"minimum":3}}}`), []byte(`2`))
	f.Add([]byte(`true`), []byte(`{`))
	f.Add([]byte(`{"$id":"https://schemas.example/x.json#","minimum":3}`), []byte(`2`))
	f.Add([]byte(`{"$schema":"http://json-schema.org/draft-04/schema#","id":"x.json","$ref":"#/definitions/a","definitions":{"a":{}}}`), []byte(`2`))
	f.Fuzz(func(t *testing.T, raw, data []byte) {
		// The same text as a provider's schema, which also reads its root identifier and
		// answers to it, and as the target of another schema's $ref by URN.
		p, perr := schema.NewMapProvider(map[string][]byte{
			"urn:babel:fuzz:x":   raw,
			"urn:babel:fuzz:ref": []byte(`{"$ref":"urn:babel:fuzz:x"}`),
		})
		if perr != nil && !errors.Is(perr, schema.ErrSchema) {
			t.Fatalf("provider error %v does not wrap ErrSchema", perr)
		}
		s, err := schema.Compile("urn:babel:fuzz:x", raw)
		if err != nil {
			if !errors.Is(err, schema.ErrSchema) {
				t.Fatalf("error %v does not wrap ErrSchema", err)
			}
			return
		}
		verdict := s.Validate(data)
		if verdict != nil && !errors.Is(verdict, schema.ErrInvalid) {
			t.Fatalf("validation error %v does not wrap ErrInvalid", verdict)
		}
		if perr != nil {
			return // a schema may compile alone and not in a provider: its $id may be taken
		}
		for _, urn := range []string{"urn:babel:fuzz:x", "urn:babel:fuzz:ref"} {
			ps, _, _ := p.Schema(urn)
			if got := ps.Validate(data); (got == nil) != (verdict == nil) {
				t.Fatalf("%s: the provider's verdict %v differs from Compile's %v", urn, got, verdict)
			}
		}
	})
}
