package schema

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Provider maps a URN to its schema. found is false when the URN has no schema: its data is
// not checked. An error means the provider could not answer. Implementations must be safe
// for concurrent use.
type Provider interface {
	Schema(urn string) (s *Schema, found bool, err error)
}

// MapProvider is a [Provider] of compiled schemas held in memory; it is read-only after
// it is built.
type MapProvider struct {
	schemas map[string]*Schema
}

var _ Provider = (*MapProvider)(nil)

// Schema implements [Provider].
func (p *MapProvider) Schema(urn string) (*Schema, bool, error) {
	s, ok := p.schemas[urn]
	return s, ok, nil
}

// URNs returns the URNs that have a schema, sorted.
func (p *MapProvider) URNs() []string {
	out := make([]string, 0, len(p.schemas))
	for u := range p.schemas {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// NewMapProvider compiles schemas (URN → schema text). The schemas may refer to each other
// with "$ref" by URN or by absolute "$id"; a relative "$ref" (a path, not only a fragment)
// has no path to be resolved against and is refused. An empty URN or a schema that does not
// compile is an error wrapping [ErrSchema]; of several, the first by URN.
func NewMapProvider(schemas map[string][]byte) (*MapProvider, error) {
	set := newSchemaSet()
	for _, urn := range sortedKeys(schemas) {
		raw := schemas[urn]
		if urn == "" {
			return nil, fmt.Errorf("%w: empty URN", ErrSchema)
		}
		// A schema's URN is its URL: another may $ref it by URN.
		if err := set.add(urn, urn, func() ([]byte, error) { return raw, nil }); err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrSchema, urn, err)
		}
	}
	return set.compile()
}

// NewDirProvider compiles every "<urn>.json" file of dir (not its subdirectories): the file
// "urn:babel:orders:created.json" is the schema of urn:babel:orders:created. Other files are
// ignored. A .json file whose name does not start with "urn:", or a schema that does not
// compile, is an error wrapping [ErrSchema]. The schemas may refer to each other with "$ref"
// by URN ("urn:babel:common:money") or by "$id".
func NewDirProvider(dir string) (*MapProvider, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: read schema directory: %w", ErrSchema, err)
	}
	files := map[string]string{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".json") {
			continue
		}
		urn := strings.TrimSuffix(name, ".json")
		if !strings.HasPrefix(urn, "urn:") {
			return nil, fmt.Errorf("%w: %s: a schema file is named <urn>.json, as urn:babel:orders:created.json", ErrSchema, name)
		}
		files[urn] = filepath.Join(dir, name)
	}
	return compileFiles(files)
}

// compileFiles compiles URN → schema file path.
func compileFiles(files map[string]string) (*MapProvider, error) {
	locs := make(map[string]string, len(files))
	for _, urn := range sortedKeys(files) {
		path := files[urn]
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrSchema, urn, err)
		}
		locs[urn] = (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()
		files[urn] = abs
	}
	return compileSources(files, locs, os.ReadFile)
}

// compileSources compiles URN → source (a path that read reads), each added at its loc.
func compileSources(sources, locs map[string]string, read func(string) ([]byte, error)) (*MapProvider, error) {
	set := newSchemaSet()
	for _, urn := range sortedKeys(sources) {
		src := sources[urn]
		if err := set.add(urn, locs[urn], func() ([]byte, error) { return read(src) }); err != nil {
			return nil, fmt.Errorf("%w: %s (%s): %w", ErrSchema, urn, src, err)
		}
	}
	return set.compile()
}

// schemaSet gathers the schemas of a provider in one compiler, so that they may $ref one
// another, and then compiles each URN's.
type schemaSet struct {
	c *jsonschema.Compiler
	// docs holds each document added, by its location.
	docs map[string]any
	// at maps every URL a document answers to (its location, the URNs it is the schema of,
	// its root "$id") to that document's location.
	at map[string]string
	// locs maps each URN to its document's location.
	locs map[string]string
}

func newSchemaSet() *schemaSet {
	return &schemaSet{c: newCompiler(), docs: map[string]any{}, at: map[string]string{}, locs: map[string]string{}}
}

// add makes the document at loc (read once, however many URNs share it) the schema of urn,
// reachable by $ref at loc and at urn.
func (s *schemaSet) add(urn, loc string, read func() ([]byte, error)) error {
	if _, ok := s.docs[loc]; !ok {
		raw, err := read()
		if err != nil {
			return fmt.Errorf("read schema: %w", err)
		}
		doc, err := decodeJSON(raw)
		if err != nil {
			return err
		}
		if err := checkRelativeRefs(doc, loc); err != nil {
			return err
		}
		if err := s.addURL(loc, loc, doc); err != nil {
			return err
		}
		s.docs[loc] = doc
	}
	s.locs[urn] = loc
	if urn == loc {
		return nil
	}
	return s.addURL(urn, loc, s.docs[loc])
}

// addURL adds doc, the document at loc, to the compiler at u.
func (s *schemaSet) addURL(u, loc string, doc any) error {
	if owner, ok := s.at[u]; ok {
		return fmt.Errorf("%s is both the schema at %s and the one at %s", u, owner, loc)
	}
	if err := s.c.AddResource(u, doc); err != nil {
		return fmt.Errorf("add schema: %w", err)
	}
	s.at[u] = loc
	return nil
}

// compile adds every document under the URL of its root "$id" (the compiler finds an "$id"
// only inside the document that declares it, so a $ref by "$id" from another schema would
// otherwise reach the refusing loader), then compiles the schema of every URN, in URN
// order so that the first error reported is the same on every run.
func (s *schemaSet) compile() (*MapProvider, error) {
	urns := make([]string, 0, len(s.locs))
	for u := range s.locs {
		urns = append(urns, u)
	}
	sort.Strings(urns)
	for _, urn := range urns {
		loc := s.locs[urn]
		id := declaredID(s.docs[loc], loc)
		if id == "" || s.at[id] == loc {
			continue // none, or a URL the document already answers to
		}
		if err := s.addURL(id, loc, s.docs[loc]); err != nil {
			return nil, fmt.Errorf("%w: %s: its $id: %w", ErrSchema, urn, err)
		}
	}
	p := &MapProvider{schemas: make(map[string]*Schema, len(urns))}
	for _, urn := range urns {
		sch, err := compile(s.c, urn, s.locs[urn])
		if err != nil {
			return nil, err
		}
		p.schemas[urn] = sch
	}
	return p, nil
}

// declaredID returns the absolute URL, without its fragment, that the root of doc (the
// document at loc) declares as its identifier, or "" when it declares none that resolves
// to an absolute URL. Which member that is ("$id", or "id" in draft-04) and when it is
// ignored (beside "$ref", before 2019-09) is the validator's reading, not ours: see
// [probe]. A relative identifier is resolved against loc when loc is hierarchical (a
// file's URL).
func declaredID(doc any, loc string) string {
	raw, _ := probe(doc)
	if raw == "" {
		return ""
	}
	id, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if !id.IsAbs() {
		base, ok := hierarchical(loc)
		if !ok {
			return ""
		}
		id = base.ResolveReference(id)
	}
	id.Fragment, id.RawFragment = "", ""
	if !id.IsAbs() {
		return ""
	}
	return id.String()
}

// hierarchical returns loc parsed, and whether it has a path that a relative reference
// resolves against (a file's URL does; a URN does not).
func hierarchical(loc string) (*url.URL, bool) {
	base, err := url.Parse(loc)
	return base, err == nil && base.Opaque == ""
}

// checkRelativeRefs refuses a relative $ref (one with a path, not only a fragment) in doc,
// the document at loc, when loc has no path to resolve it against. The validator reads such
// a $ref in a schema at a URN as a $ref to the schema itself, so a property would be checked
// against the wrong schema, silently.
func checkRelativeRefs(doc any, loc string) error {
	if _, ok := hierarchical(loc); ok {
		return nil
	}
	if _, rel := probe(doc); rel != "" {
		return fmt.Errorf("a relative $ref (to %s) in the schema at %s, which has no path to resolve it against: refer to another schema by its URN or by an absolute $id", rel, loc)
	}
	return nil
}

// probeBase is the URL at which probe compiles a document: a URL under it that the loader
// is asked for comes from a relative $ref of the document.
const probeBase = "babelqueue-probe:///"

// probe compiles doc alone at probeBase, every other document it names read as the schema
// true, and returns the identifier the validator found at its root, as written, and the
// first relative $ref it met, as resolved under probeBase ("" for none). A document that
// does not compile so has no identifier here; its own compilation reports why.
func probe(doc any) (id, relative string) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	l := &probeLoader{}
	c.UseLoader(l)
	if c.AddResource(probeBase, doc) != nil {
		return "", ""
	}
	s, err := c.Compile(probeBase)
	if err != nil {
		return "", l.relative
	}
	return s.ID, l.relative
}

// probeLoader reads every URL as the schema true, and keeps the first one under probeBase.
type probeLoader struct{ relative string }

func (l *probeLoader) Load(u string) (any, error) {
	if rel, ok := strings.CutPrefix(u, probeBase); ok && l.relative == "" {
		l.relative = rel
	}
	return true, nil
}

// RegistryEntry is one entry of a registry.json manifest.
type RegistryEntry struct {
	// URN is the message URN.
	URN string `json:"urn"`
	// Schema is the path of the URN's data schema, relative to the manifest's directory
	// unless absolute.
	Schema string `json:"schema"`
	// Owner is the owning team; not used for validation.
	Owner string `json:"owner,omitempty"`
	// Status is the entry's lifecycle state (such as "active"); not used for validation.
	Status string `json:"status,omitempty"`
}

// ParseRegistry reads a registry.json manifest: an object whose "schemas" member is an
// array of entries, each with a non-empty "urn" and "schema"; a URN may appear once. Other
// members are accepted and ignored. Errors wrap [ErrSchema] and name the entry.
func ParseRegistry(data []byte) ([]RegistryEntry, error) {
	var m struct {
		Schemas *[]json.RawMessage `json:"schemas"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%w: registry.json: %w", ErrSchema, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: registry.json: text after the manifest", ErrSchema)
	}
	if m.Schemas == nil {
		return nil, fmt.Errorf("%w: registry.json: no \"schemas\" array", ErrSchema)
	}
	out := make([]RegistryEntry, 0, len(*m.Schemas))
	seen := map[string]bool{}
	for i, raw := range *m.Schemas {
		var e RegistryEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("%w: registry.json: schemas[%d]: %w", ErrSchema, i, err)
		}
		switch {
		case e.URN == "":
			return nil, fmt.Errorf("%w: registry.json: schemas[%d] has no \"urn\"", ErrSchema, i)
		case e.Schema == "":
			return nil, fmt.Errorf("%w: registry.json: schemas[%d] (%s) has no \"schema\" path", ErrSchema, i, e.URN)
		case seen[e.URN]:
			return nil, fmt.Errorf("%w: registry.json: schemas[%d]: %s is declared more than once", ErrSchema, i, e.URN)
		}
		seen[e.URN] = true
		out = append(out, e)
	}
	return out, nil
}

// NewRegistryProvider reads the registry.json manifest at path (see [ParseRegistry]) and
// compiles the schema of every entry. Errors wrap [ErrSchema].
func NewRegistryProvider(path string) (*MapProvider, error) {
	data, err := os.ReadFile(path) //nolint:gosec // reading the manifest the caller names is the point
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	entries, err := ParseRegistry(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(path)
	files := make(map[string]string, len(entries))
	for _, e := range entries {
		p := filepath.FromSlash(e.Schema)
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		files[e.URN] = p
	}
	return compileFiles(files)
}

// NewRegistryProviderFS is [NewRegistryProvider] on a file system, such as an embed.FS that
// ships the registry inside the binary: name is the manifest's slash-separated path in fsys,
// and every entry's "schema" path is relative to the manifest's directory (absolute paths
// and paths leaving fsys are refused). Errors wrap [ErrSchema].
func NewRegistryProviderFS(fsys fs.FS, name string) (*MapProvider, error) {
	data, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrSchema, err)
	}
	entries, err := ParseRegistry(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	dir := path.Dir(name)
	sources := make(map[string]string, len(entries))
	locs := make(map[string]string, len(entries))
	for _, e := range entries {
		p := path.Join(dir, e.Schema)
		if path.IsAbs(e.Schema) || !fs.ValidPath(p) {
			return nil, fmt.Errorf("%w: %s: %s: schema path %q is not inside the file system", ErrSchema, name, e.URN, e.Schema)
		}
		sources[e.URN] = p
		locs[e.URN] = "fs:///" + p
	}
	return compileSources(sources, locs, func(p string) ([]byte, error) { return fs.ReadFile(fsys, p) })
}
