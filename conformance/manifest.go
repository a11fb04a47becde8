package conformance

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ManifestSchemaVersion is the manifest schema_version this runner understands. A suite
// declaring another version is refused by [Load], since its blocks may mean other things.
const ManifestSchemaVersion = 1

// Errors returned by [Load].
var (
	// ErrSuite is wrapped by every error of [Load]: the directory is not a usable suite.
	ErrSuite = errors.New("conformance: invalid suite")
)

// block is one named entry of the manifest, in manifest order.
type block struct {
	name string
	raw  json.RawMessage
}

// orderedObject splits a JSON object into its members, keeping their order. Duplicate keys
// keep the last value, as everywhere in BabelQueue.
func orderedObject(raw []byte) ([]block, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("read object: %w", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out []block
	index := map[string]int{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("read key: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("unexpected token %v", tok)
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, fmt.Errorf("read %q: %w", key, err)
		}
		if i, dup := index[key]; dup {
			out[i].raw = val
			continue
		}
		index[key] = len(out)
		out = append(out, block{name: key, raw: val})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("read object end: %w", err)
	}
	return out, nil
}

// readFixture reads a file named by the manifest, relative to the suite directory. Names
// that would leave the directory are refused.
func (s *Suite) readFixture(name string) ([]byte, error) {
	if name == "" {
		return nil, errors.New("no fixture file named")
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return nil, fmt.Errorf("fixture %q is outside the suite directory", name)
	}
	b, err := os.ReadFile(filepath.Join(s.dir, filepath.FromSlash(name)))
	if err != nil {
		return nil, fmt.Errorf("read fixture: %w", err)
	}
	return b, nil
}

// parseJSON parses a JSON text into plain values with exact numbers (json.Number).
func parseJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("parse JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("parse JSON: trailing data")
	}
	return v, nil
}

// deepEqual compares two parsed JSON values: same JSON types, objects with the same keys,
// arrays in order, and numbers by exact value (1.0 equals 1, 9007199254740993 does not
// equal 9007199254740992).
func deepEqual(a, b any) bool {
	switch av := a.(type) {
	case nil:
		return b == nil
	case bool:
		bv, ok := b.(bool)
		return ok && av == bv
	case string:
		bv, ok := b.(string)
		return ok && av == bv
	case json.Number:
		bv, ok := b.(json.Number)
		if !ok {
			return false
		}
		ar, aok := new(big.Rat).SetString(string(av))
		br, bok := new(big.Rat).SetString(string(bv))
		return aok && bok && ar.Cmp(br) == 0
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for i := range av {
			if !deepEqual(av[i], bv[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok || len(av) != len(bv) {
			return false
		}
		for k, x := range av {
			y, ok := bv[k]
			if !ok || !deepEqual(x, y) {
				return false
			}
		}
		return true
	default:
		return false
	}
}

// lookup resolves an RFC 6901 JSON pointer in a parsed JSON value.
func lookup(doc any, pointer string) (any, bool) {
	if pointer == "" {
		return doc, true
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// lookupRaw resolves an RFC 6901 pointer in a JSON text and returns the member's exact
// text, with insignificant whitespace removed.
func lookupRaw(doc []byte, pointer string) (string, bool) {
	cur := json.RawMessage(doc)
	if pointer != "" {
		if !strings.HasPrefix(pointer, "/") {
			return "", false
		}
		for _, tok := range strings.Split(pointer[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			trimmed := bytes.TrimLeft(cur, " \t\r\n")
			if len(trimmed) > 0 && trimmed[0] == '[' {
				var arr []json.RawMessage
				i, err := strconv.Atoi(tok)
				if json.Unmarshal(cur, &arr) != nil || err != nil || i < 0 || i >= len(arr) {
					return "", false
				}
				cur = arr[i]
				continue
			}
			members, err := orderedObject(cur)
			if err != nil {
				return "", false
			}
			found := false
			for _, m := range members {
				if m.name == tok {
					cur, found = m.raw, true
				}
			}
			if !found {
				return "", false
			}
		}
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, cur); err != nil {
		return "", false
	}
	return buf.String(), true
}

// describe renders a parsed JSON value compactly for failure messages.
func describe(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}
