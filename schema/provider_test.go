package schema_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/schema"
)

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
}

func TestMapProvider(t *testing.T) {
	p, err := schema.NewMapProvider(map[string][]byte{
		orderURN:                  []byte(orderSchema),
		"urn:babel:common:money":  []byte(`{"type":"number","minimum":0}`),
		"urn:babel:orders:refund": []byte(`{"type":"object","properties":{"amount":{"$ref":"urn:babel:common:money"}}}`),
	})
	require.NoError(t, err)
	assert.Equal(t, []string{"urn:babel:common:money", orderURN, "urn:babel:orders:refund"}, p.URNs())
	s, found, err := p.Schema("urn:babel:orders:refund")
	require.NoError(t, err)
	require.True(t, found)
	require.Error(t, s.Validate([]byte(`{"amount":-1}`)), "the $ref by URN applies")
	require.NoError(t, s.Validate([]byte(`{"amount":1}`)))
	_, found, err = p.Schema("urn:babel:users:registered")
	require.NoError(t, err)
	assert.False(t, found)

	_, err = schema.NewMapProvider(map[string][]byte{"": []byte(`{}`)})
	require.ErrorIs(t, err, schema.ErrSchema)
	_, err = schema.NewMapProvider(map[string][]byte{orderURN: []byte(`{"type":7}`)})
	require.ErrorIs(t, err, schema.ErrSchema)
	assert.Contains(t, err.Error(), orderURN)
}

func TestDirProvider(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		orderURN + ".json":             orderSchema,
		"urn:babel:common:money.json":  `{"type":"number","minimum":0}`,
		"urn:babel:orders:refund.json": `{"properties":{"amount":{"$ref":"urn:babel:common:money"}}}`,
		"README.md":                    "not a schema",
		"nested/urn:babel:x:y.json":    `{"type":7}`,
	})
	p, err := schema.NewDirProvider(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{"urn:babel:common:money", orderURN, "urn:babel:orders:refund"}, p.URNs())
	s, found, err := p.Schema("urn:babel:orders:refund")
	require.NoError(t, err)
	require.True(t, found)
	require.Error(t, s.Validate([]byte(`{"amount":-1}`)), "the $ref by URN applies")
	require.NoError(t, s.Validate([]byte(`{"amount":1}`)))

	writeFiles(t, dir, map[string]string{"orders.json": `{}`})
	_, err = schema.NewDirProvider(dir)
	require.ErrorIs(t, err, schema.ErrSchema)
	assert.Contains(t, err.Error(), "orders.json")

	_, err = schema.NewDirProvider(filepath.Join(dir, "missing"))
	require.ErrorIs(t, err, schema.ErrSchema)

	bad := t.TempDir()
	writeFiles(t, bad, map[string]string{orderURN + ".json": `{"$ref":"../outside.json"}`})
	_, err = schema.NewDirProvider(bad)
	require.ErrorIs(t, err, schema.ErrSchema, "a $ref to a file the provider was not given is refused")
}

func TestRegistryProvider(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"registry.json": `{
  "schemas": [
    {"urn": "urn:babel:orders:created", "schema": "schemas/orders-created.json", "owner": "orders", "status": "active"},
    {"urn": "urn:babel:users:registered", "schema": "schemas/users-registered.json", "owner": "identity", "status": "deprecated", "notes": "kept"},
    {"urn": "urn:babel:orders:refund", "schema": "schemas/refund/refund.json"}
  ],
  "version": 3
}`,
		"schemas/orders-created.json":   orderSchema,
		"schemas/users-registered.json": `{"type":"object","required":["user_id"]}`,
		"schemas/refund/refund.json":    `{"properties":{"order":{"$ref":"../orders-created.json"}}}`,
	})
	p, err := schema.NewRegistryProvider(filepath.Join(dir, "registry.json"))
	require.NoError(t, err)
	assert.Equal(t, []string{orderURN, "urn:babel:orders:refund", "urn:babel:users:registered"}, p.URNs())
	s, found, err := p.Schema(orderURN)
	require.NoError(t, err)
	require.True(t, found)
	require.NoError(t, s.Validate([]byte(`{"order_id":1}`)))
	require.Error(t, s.Validate([]byte(`{"order_id":0}`)))
	refund, _, err := p.Schema("urn:babel:orders:refund")
	require.NoError(t, err)
	require.Error(t, refund.Validate([]byte(`{"order":{"order_id":0}}`)), "a $ref by path relative to the referring file applies")
	require.NoError(t, refund.Validate([]byte(`{"order":{"order_id":1}}`)))

	_, err = schema.NewRegistryProvider(filepath.Join(dir, "missing.json"))
	require.ErrorIs(t, err, schema.ErrSchema)
	writeFiles(t, dir, map[string]string{"broken.json": `{"schemas":[{"urn":"urn:babel:a:b","schema":"nope.json"}]}`})
	_, err = schema.NewRegistryProvider(filepath.Join(dir, "broken.json"))
	require.ErrorIs(t, err, schema.ErrSchema)
	assert.Contains(t, err.Error(), "urn:babel:a:b")
}

func TestRegistryProviderFS(t *testing.T) {
	fsys := fstest.MapFS{
		"reg/registry.json":               {Data: []byte(`{"schemas":[{"urn":"urn:babel:orders:created","schema":"schemas/orders-created.json"},{"urn":"urn:babel:orders:refund","schema":"schemas/refund.json"}]}`)},
		"reg/schemas/orders-created.json": {Data: []byte(orderSchema)},
		"reg/schemas/refund.json":         {Data: []byte(`{"properties":{"order":{"$ref":"orders-created.json"},"same":{"$ref":"urn:babel:orders:created"}}}`)},
		"escape/registry.json":            {Data: []byte(`{"schemas":[{"urn":"urn:babel:a:b","schema":"../../x.json"}]}`)},
		"absolute/registry.json":          {Data: []byte(`{"schemas":[{"urn":"urn:babel:a:b","schema":"/x.json"}]}`)},
		"missing/registry.json":           {Data: []byte(`{"schemas":[{"urn":"urn:babel:a:b","schema":"x.json"}]}`)},
	}
	p, err := schema.NewRegistryProviderFS(fsys, "reg/registry.json")
	require.NoError(t, err)
	s, found, err := p.Schema("urn:babel:orders:refund")
	require.NoError(t, err)
	require.True(t, found)
	require.Error(t, s.Validate([]byte(`{"order":{"order_id":0}}`)), "a relative $ref applies")
	require.Error(t, s.Validate([]byte(`{"same":{"order_id":0}}`)), "a $ref by URN applies")
	require.NoError(t, s.Validate([]byte(`{"order":{"order_id":1},"same":{"order_id":2}}`)))
	for _, name := range []string{"escape/registry.json", "absolute/registry.json", "missing/registry.json", "none.json"} {
		_, err := schema.NewRegistryProviderFS(fsys, name)
		require.ErrorIs(t, err, schema.ErrSchema, name)
	}
}

func TestParseRegistryErrors(t *testing.T) {
	for name, raw := range map[string]string{
		"not json":      `{`,
		"no schemas":    `{}`,
		"schemas null":  `{"schemas": null}`,
		"not an array":  `{"schemas": {}}`,
		"entry no urn":  `{"schemas": [{"schema": "a.json"}]}`,
		"entry no path": `{"schemas": [{"urn": "urn:babel:a:b"}]}`,
		"duplicate":     `{"schemas": [{"urn": "urn:babel:a:b", "schema": "a.json"}, {"urn": "urn:babel:a:b", "schema": "b.json"}]}`,
		"bad entry":     `{"schemas": [7]}`,
		"trailing":      `{"schemas": []} []`,
		"urn number":    `{"schemas": [{"urn": 1, "schema": "a.json"}]}`,
	} {
		_, err := schema.ParseRegistry([]byte(raw))
		require.ErrorIs(t, err, schema.ErrSchema, name)
	}
	// The error names the entry.
	for want, raw := range map[string]string{
		`schemas[1] has no "urn"`:                         `{"schemas": [{"urn": "urn:babel:a:b", "schema": "a.json"}, {"schema": "b.json"}]}`,
		`schemas[0] (urn:babel:a:b) has no "schema"`:      `{"schemas": [{"urn": "urn:babel:a:b"}]}`,
		`schemas[2]: urn:babel:a:b is declared more than`: `{"schemas": [{"urn": "urn:babel:a:b", "schema": "a.json"}, {"urn": "urn:babel:c:d", "schema": "c.json"}, {"urn": "urn:babel:a:b", "schema": "b.json"}]}`,
		`schemas[1]: `: `{"schemas": [{"urn": "urn:babel:a:b", "schema": "a.json"}, 7]}`,
	} {
		_, err := schema.ParseRegistry([]byte(raw))
		require.ErrorIs(t, err, schema.ErrSchema, want)
		assert.Contains(t, err.Error(), want)
	}
	entries, err := schema.ParseRegistry([]byte(`{"schemas": []}`))
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// providersOf builds each provider from the same schemas (URN → text): in memory, as a
// directory of <urn>.json files, and as a registry.json on a file system.
func providersOf(t *testing.T, schemas map[string]string) map[string]func() (*schema.MapProvider, error) {
	t.Helper()
	raw := map[string][]byte{}
	files := map[string]string{}
	fsys := fstest.MapFS{}
	var entries []string
	for urn, text := range schemas {
		raw[urn] = []byte(text)
		files[urn+".json"] = text
		fsys["reg/"+urn+".json"] = &fstest.MapFile{Data: []byte(text)}
		entries = append(entries, fmt.Sprintf(`{"urn":%q,"schema":%q}`, urn, urn+".json"))
	}
	fsys["reg/registry.json"] = &fstest.MapFile{Data: []byte(`{"schemas":[` + strings.Join(entries, ",") + `]}`)}
	dir := t.TempDir()
	writeFiles(t, dir, files)
	return map[string]func() (*schema.MapProvider, error){
		"map":      func() (*schema.MapProvider, error) { return schema.NewMapProvider(raw) },
		"dir":      func() (*schema.MapProvider, error) { return schema.NewDirProvider(dir) },
		"registry": func() (*schema.MapProvider, error) { return schema.NewRegistryProviderFS(fsys, "reg/registry.json") },
	}
}

// A schema that declares an "$id" may be referred to by it, and still by its URN, from any
// provider: the validator finds an "$id" only in the document that declares it.
func TestRefByID(t *testing.T) {
	for name, build := range providersOf(t, map[string]string{
		"urn:babel:common:money": `{"$id":"https://schemas.example/money.json","type":"number","minimum":0}`,
		"urn:babel:common:sku":   `{"$schema":"http://json-schema.org/draft-04/schema#","id":"https://schemas.example/sku.json#","type":"string","minLength":3}`,
		"urn:babel:orders:refund": `{"properties":{
			"by_id":  {"$ref":"https://schemas.example/money.json"},
			"by_urn": {"$ref":"urn:babel:common:money"},
			"sku":    {"$ref":"https://schemas.example/sku.json"}}}`,
	}) {
		t.Run(name, func(t *testing.T) {
			p, err := build()
			require.NoError(t, err)
			s, found, err := p.Schema("urn:babel:orders:refund")
			require.NoError(t, err)
			require.True(t, found)
			require.NoError(t, s.Validate([]byte(`{"by_id":1,"by_urn":2,"sku":"abc"}`)))
			require.Error(t, s.Validate([]byte(`{"by_id":-1}`)), "the $ref by $id applies")
			require.Error(t, s.Validate([]byte(`{"by_urn":-1}`)), "the $ref by URN applies")
			require.Error(t, s.Validate([]byte(`{"sku":"a"}`)), "the $ref by a draft-04 id applies")
		})
	}
}

// A relative "$id" of a schema file is resolved against the file's URL, so a schema beside
// it reaches it by the same relative $ref, even one compiled before it ("a" sorts before
// "common"): the compiler would meet the "$id" only when it compiles the file that declares it.
func TestRelativeIDOfAFile(t *testing.T) {
	builds := providersOf(t, map[string]string{
		"urn:babel:common:money": `{"$id":"money.json","type":"number","minimum":0}`,
		"urn:babel:a:refund":     `{"properties":{"amount":{"$ref":"money.json"}}}`,
	})
	for _, name := range []string{"dir", "registry"} {
		p, err := builds[name]()
		require.NoError(t, err, name)
		s, found, err := p.Schema("urn:babel:a:refund")
		require.NoError(t, err, name)
		require.True(t, found, name)
		require.NoError(t, s.Validate([]byte(`{"amount":1}`)), name)
		require.Error(t, s.Validate([]byte(`{"amount":-1}`)), "%s: the $ref by the relative $id applies", name)
	}
}

// A schema given by its URN alone (in memory, or to Compile) has no path that a relative
// $ref could be resolved against, so one is refused at setup: the validator would read it as
// a $ref to the schema itself, and validate the property against the wrong schema.
func TestRelativeRefOfASchemaInMemoryIsRefused(t *testing.T) {
	refund := `{"properties":{"amount":{"$ref":"money.json"}}}`
	_, err := schema.NewMapProvider(map[string][]byte{
		"urn:babel:common:money": []byte(`{"$id":"money.json","type":"number","minimum":0}`),
		"urn:babel:a:refund":     []byte(refund),
	})
	require.ErrorIs(t, err, schema.ErrSchema)
	assert.Contains(t, err.Error(), "urn:babel:a:refund: a relative $ref (to money.json)")
	_, err = schema.Compile("urn:babel:a:refund", []byte(refund))
	require.ErrorIs(t, err, schema.ErrSchema)
	assert.Contains(t, err.Error(), "urn:babel:a:refund: a relative $ref (to money.json)")
	_, err = schema.Compile("urn:babel:a:refund", []byte(`{"$defs":{"m":{"minimum":0}},"properties":{"amount":{"$ref":"#/$defs/m"}}}`))
	require.NoError(t, err, "a $ref within the document is fine")

	// Under an absolute $id, a relative $ref has a path to resolve against.
	p, err := schema.NewMapProvider(map[string][]byte{
		"urn:babel:common:money": []byte(`{"$id":"https://schemas.example/money.json","type":"number","minimum":0}`),
		"urn:babel:a:refund":     []byte(`{"$id":"https://schemas.example/refund.json","properties":{"amount":{"$ref":"money.json"}}}`),
	})
	require.NoError(t, err, "a relative $ref under an absolute $id")
	s, _, err := p.Schema("urn:babel:a:refund")
	require.NoError(t, err)
	require.ErrorIs(t, s.ValidateValue(map[string]any{"amount": -1}), schema.ErrInvalid, "the $ref reached money.json")
	require.NoError(t, s.ValidateValue(map[string]any{"amount": 1}))
}

// Two schemas that answer to one URL are refused, naming the URL: a $ref to it would reach
// one of them by chance.
func TestOneURLOneSchema(t *testing.T) {
	for dup, schemas := range map[string]map[string]string{
		"https://schemas.example/money.json": {
			"urn:babel:common:money": `{"$id":"https://schemas.example/money.json","minimum":0}`,
			"urn:babel:common:price": `{"$id":"https://schemas.example/money.json#","minimum":1}`,
		},
		"urn:babel:common:money": {
			"urn:babel:common:money": `{"minimum":0}`,
			"urn:babel:common:price": `{"$id":"urn:babel:common:money","minimum":1}`,
		},
	} {
		for name, build := range providersOf(t, schemas) {
			_, err := build()
			require.ErrorIs(t, err, schema.ErrSchema, name)
			assert.Contains(t, err.Error(), "urn:babel:common:price: its $id: "+dup+" is both the schema at", name)
		}
	}
}

// Two URNs of a registry may share one schema file, and each is a URL of it.
func TestRegistryURNsSharingAFileAreBothReachable(t *testing.T) {
	fsys := fstest.MapFS{
		"registry.json": {Data: []byte(`{"schemas":[
			{"urn":"urn:babel:common:money","schema":"money.json"},
			{"urn":"urn:babel:common:price","schema":"money.json"},
			{"urn":"urn:babel:orders:refund","schema":"refund.json"}]}`)},
		"money.json":  {Data: []byte(`{"type":"number","minimum":0}`)},
		"refund.json": {Data: []byte(`{"properties":{"a":{"$ref":"urn:babel:common:money"},"b":{"$ref":"urn:babel:common:price"}}}`)},
	}
	p, err := schema.NewRegistryProviderFS(fsys, "registry.json")
	require.NoError(t, err)
	s, _, err := p.Schema("urn:babel:orders:refund")
	require.NoError(t, err)
	require.Error(t, s.Validate([]byte(`{"a":-1}`)))
	require.Error(t, s.Validate([]byte(`{"b":-1}`)))
	require.NoError(t, s.Validate([]byte(`{"a":1,"b":2}`)))
}

// A registry entry's absolute schema path is read as it is, not under the manifest's
// directory.
func TestRegistryProviderReadsAnAbsoluteSchemaPath(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	abs := filepath.Join(elsewhere, "orders-created.json")
	writeFiles(t, elsewhere, map[string]string{"orders-created.json": orderSchema})
	manifest, err := json.Marshal(map[string]any{"schemas": []map[string]string{{"urn": orderURN, "schema": filepath.ToSlash(abs)}}})
	require.NoError(t, err)
	writeFiles(t, dir, map[string]string{"registry.json": string(manifest)})
	p, err := schema.NewRegistryProvider(filepath.Join(dir, "registry.json"))
	require.NoError(t, err)
	s, found, err := p.Schema(orderURN)
	require.NoError(t, err)
	require.True(t, found)
	require.Error(t, s.Validate([]byte(`{"order_id":0}`)))
}

// Of several broken schemas, a provider reports the first by URN, on every build.
func TestProviderReportsTheFirstBrokenSchemaByURN(t *testing.T) {
	for _, broken := range []string{`{`, `{"type":7}`} {
		schemas := map[string]string{}
		for _, urn := range []string{"urn:babel:c:c", "urn:babel:a:a", "urn:babel:d:d", "urn:babel:b:b"} {
			schemas[urn] = broken
		}
		for name, build := range providersOf(t, schemas) {
			for range 20 {
				_, err := build()
				require.ErrorIs(t, err, schema.ErrSchema)
				require.Contains(t, err.Error(), "urn:babel:a:a", "%s, schema %s", name, broken)
			}
		}
	}
}
