package schema

import (
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// checkSound refuses a compiled schema that can validate nothing: one with a "$ref" cycle
// that never moves into the data ({"$ref":"#"}, or a → b → a through $ref, allOf, anyOf,
// oneOf, not, if/then/else or dependentSchemas, which apply to the same value), where the
// validator would go round the cycle for every value and fail it; and one that no value
// can satisfy (false, {"not":{}}, an allOf holding one of those, an anyOf or oneOf whose
// every branch is one). The error names the path of the cycle, or the schema's location.
func checkSound(root *jsonschema.Schema) error {
	all := map[*jsonschema.Schema]bool{}
	collectSchemas(root, all)
	// The same order on every run, so the cycle reported is the same.
	list := make([]*jsonschema.Schema, 0, len(all))
	for s := range all {
		list = append(list, s)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Location < list[j].Location })
	state := map[*jsonschema.Schema]int{} // 0 unseen, 1 on the path, 2 done
	for _, s := range list {
		if path := inPlaceCycle(s, state, nil); path != nil {
			return fmt.Errorf("a $ref cycle that never moves into the data, so no value can be validated: %s", strings.Join(path, " → "))
		}
	}
	if never(root, map[*jsonschema.Schema]bool{}) {
		return fmt.Errorf("the schema at %s accepts no value at all", root.Location)
	}
	return nil
}

// inPlace returns the subschemas that apply to the same value as s.
func inPlace(s *jsonschema.Schema) []*jsonschema.Schema {
	out := make([]*jsonschema.Schema, 0, 4)
	add := func(c *jsonschema.Schema) {
		if c != nil {
			out = append(out, c)
		}
	}
	add(s.Ref)
	add(s.RecursiveRef)
	if s.DynamicRef != nil {
		add(s.DynamicRef.Ref)
	}
	add(s.Not)
	add(s.If)
	add(s.Then)
	add(s.Else)
	out = append(out, s.AllOf...)
	out = append(out, s.AnyOf...)
	out = append(out, s.OneOf...)
	for _, k := range sortedKeys(s.DependentSchemas) {
		add(s.DependentSchemas[k])
	}
	for _, k := range sortedKeys(s.Dependencies) {
		if c, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			add(c)
		}
	}
	return out
}

// inPlaceCycle returns the locations of an in-place cycle reachable from s, nil for none.
func inPlaceCycle(s *jsonschema.Schema, state map[*jsonschema.Schema]int, path []string) []string {
	switch state[s] {
	case 2:
		return nil
	case 1:
		for i, loc := range path {
			if loc == s.Location {
				return append(append([]string(nil), path[i:]...), s.Location)
			}
		}
		return append(path, s.Location)
	}
	state[s] = 1
	path = append(path, s.Location)
	for _, c := range inPlace(s) {
		if cyc := inPlaceCycle(c, state, path); cyc != nil {
			return cyc
		}
	}
	state[s] = 2
	return nil
}

// collectSchemas adds every schema reachable from s to all.
func collectSchemas(s *jsonschema.Schema, all map[*jsonschema.Schema]bool) {
	if s == nil || all[s] {
		return
	}
	all[s] = true
	for _, c := range inPlace(s) {
		collectSchemas(c, all)
	}
	for _, c := range []*jsonschema.Schema{s.PropertyNames, s.UnevaluatedProperties, s.Contains, s.Items2020, s.UnevaluatedItems, s.ContentSchema} {
		collectSchemas(c, all)
	}
	for _, k := range sortedKeys(s.Properties) {
		collectSchemas(s.Properties[k], all)
	}
	for _, c := range s.PatternProperties {
		collectSchemas(c, all)
	}
	for _, c := range s.PrefixItems {
		collectSchemas(c, all)
	}
	for _, v := range []any{s.AdditionalProperties, s.Items, s.AdditionalItems} {
		switch v := v.(type) {
		case *jsonschema.Schema:
			collectSchemas(v, all)
		case []*jsonschema.Schema:
			for _, c := range v {
				collectSchemas(c, all)
			}
		}
	}
}

// never reports whether no value can satisfy s, as far as the simple forms tell (false,
// not of an unconstrained schema, and what is built of those by $ref, allOf, anyOf and
// oneOf). It does not try to solve constraints: {"type":"string","minLength":2,
// "maxLength":1} is not found.
func never(s *jsonschema.Schema, seen map[*jsonschema.Schema]bool) bool {
	if s == nil || seen[s] {
		return false
	}
	seen[s] = true
	defer delete(seen, s)
	switch {
	case s.Bool != nil:
		return !*s.Bool
	case s.Not != nil && unconstrained(s.Not):
		return true
	case never(s.Ref, seen):
		return true
	}
	for _, c := range s.AllOf {
		if never(c, seen) {
			return true
		}
	}
	for _, branches := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf} {
		if len(branches) == 0 {
			continue
		}
		all := true
		for _, c := range branches {
			all = all && never(c, seen)
		}
		if all {
			return true
		}
	}
	return false
}

// annotations are the fields of a compiled schema that constrain nothing.
var annotations = map[string]bool{
	"DraftVersion": true, "Location": true, "ID": true, "Anchor": true, "RecursiveAnchor": true,
	"DynamicAnchor": true, "Format": true, "Title": true, "Description": true, "Default": true,
	"Comment": true, "ReadOnly": true, "WriteOnly": true, "Examples": true, "Deprecated": true,
}

// unconstrained reports whether s accepts every value: true, or a schema with nothing but
// annotations ({}).
func unconstrained(s *jsonschema.Schema) bool {
	if s.Bool != nil {
		return *s.Bool
	}
	v := reflect.ValueOf(s).Elem()
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || annotations[f.Name] {
			continue
		}
		if !v.Field(i).IsZero() {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
