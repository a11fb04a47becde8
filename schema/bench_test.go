package schema_test

import (
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/schema"
)

// BenchmarkCheck compares the schema check of one message's data with decoding the
// message itself (envelope.Classify), the cost every consumed message already pays.
func BenchmarkCheck(b *testing.B) {
	env, err := envelope.Make(orderURN, map[string]any{
		"order_id": 1042, "amount": 99.9, "currency": "USD",
		"lines": []map[string]any{{"sku": "a-1", "qty": 2}, {"sku": "b-7", "qty": 1}},
	})
	if err != nil {
		b.Fatal(err)
	}
	payload, err := env.Encode()
	if err != nil {
		b.Fatal(err)
	}
	p, err := schema.NewMapProvider(map[string][]byte{orderURN: []byte(orderSchema)})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("envelope.Classify", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := envelope.Classify(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("schema.Check/valid", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := schema.Check(p, orderURN, env.Data); err != nil {
				b.Fatal(err)
			}
		}
	})
	bad := []byte(`{"order_id":0,"currency":"GBP","extra":1}`)
	b.Run("schema.Check/invalid", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if err := schema.Check(p, orderURN, bad); err == nil {
				b.Fatal("accepted invalid data")
			}
		}
	})
}
