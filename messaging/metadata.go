package messaging

import (
	"fmt"
	"iter"
	"reflect"
)

// Metadata is an immutable set of typed items attached to a message, at most
// one item per dynamic type. The zero value is empty and
// ready to use. Items should be small struct values.
type Metadata struct {
	items []any
}

// NewMetadata returns metadata holding items; a later item of the same
// dynamic type replaces an earlier one. A nil item panics.
func NewMetadata(items ...any) Metadata {
	var md Metadata
	for _, it := range items {
		md = md.With(it)
	}
	return md
}

// With returns a copy of m holding item, replacing an item of the same
// dynamic type. A nil item panics.
func (m Metadata) With(item any) Metadata {
	if item == nil {
		panic(fmt.Errorf("%w: nil metadata item", ErrNilArgument))
	}
	t := reflect.TypeOf(item)
	out := make([]any, 0, len(m.items)+1)
	for _, it := range m.items {
		if reflect.TypeOf(it) != t {
			out = append(out, it)
		}
	}
	return Metadata{items: append(out, item)}
}

// Without returns a copy of m without the item whose dynamic type is the type
// of sample.
func (m Metadata) Without(sample any) Metadata {
	t := reflect.TypeOf(sample)
	out := make([]any, 0, len(m.items))
	for _, it := range m.items {
		if reflect.TypeOf(it) != t {
			out = append(out, it)
		}
	}
	return Metadata{items: out}
}

// Len returns the number of items.
func (m Metadata) Len() int { return len(m.items) }

// All iterates over the items in insertion order.
func (m Metadata) All() iter.Seq[any] {
	return func(yield func(any) bool) {
		for _, it := range m.items {
			if !yield(it) {
				return
			}
		}
	}
}

// MetadataOf returns the item whose dynamic type is exactly M.
func MetadataOf[M any](md Metadata) (M, bool) {
	t := reflect.TypeFor[M]()
	for _, it := range md.items {
		if reflect.TypeOf(it) == t {
			v, ok := it.(M)
			return v, ok
		}
	}
	var zero M
	return zero, false
}
