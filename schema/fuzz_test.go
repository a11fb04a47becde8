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
	f.Fuzz(func(t *testing.T, raw, data []byte) {
		s, err := schema.Compile("urn:babel:fuzz:x", raw)
		if err != nil {
			if !errors.Is(err, schema.ErrSchema) {
				t.Fatalf("error %v does not wrap ErrSchema", err)
			}
			return
		}
		if err := s.Validate(data); err != nil && !errors.Is(err, schema.ErrInvalid) {
			t.Fatalf("validation error %v does not wrap ErrInvalid", err)
		}
	})
}
