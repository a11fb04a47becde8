package envelope_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// Each benchmark runs the SDK beside an encoding/json baseline doing the same job through
// map[string]any, so the ratio reads from one run:
//
//	go test -run='^$' -bench=. -benchmem ./envelope

type benchPayload struct {
	name    string
	payload []byte
}

func benchPayloads(b *testing.B) []benchPayload {
	b.Helper()
	var out []benchPayload
	if fx := fixturePayloads(b); fx["order-created.json"] != nil {
		out = append(out, benchPayload{"order-created", fx["order-created.json"]})
		// The same envelope as the SDKs put it on the wire: without the fixture's indentation.
		var compact bytes.Buffer
		if err := json.Compact(&compact, fx["order-created.json"]); err != nil {
			b.Fatal(err)
		}
		out = append(out, benchPayload{"order-created-compact", compact.Bytes()})
	} else {
		b.Logf("conformance fixtures not found under %s: order-created benchmarks skipped", conformanceDir)
	}
	nested, err := os.ReadFile(filepath.Join("testdata", "nested-4k.json"))
	if err != nil {
		b.Fatal(err)
	}
	return append(out, benchPayload{"nested-4k", nested})
}

var (
	sinkEnvelope *envelope.Envelope
	sinkMap      map[string]any
	sinkBytes    []byte
)

func BenchmarkDecode(b *testing.B) {
	for _, p := range benchPayloads(b) {
		b.Run(p.name+"/sdk", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p.payload)))
			for b.Loop() {
				e, err := envelope.Decode(p.payload)
				if err != nil {
					b.Fatal(err)
				}
				sinkEnvelope = e
			}
		})
		b.Run(p.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p.payload)))
			for b.Loop() {
				var m map[string]any
				if err := json.Unmarshal(p.payload, &m); err != nil {
					b.Fatal(err)
				}
				sinkMap = m
			}
		})
	}
}

func BenchmarkClassify(b *testing.B) {
	for _, p := range benchPayloads(b) {
		b.Run(p.name+"/sdk", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p.payload)))
			for b.Loop() {
				e, err := envelope.Classify(p.payload)
				if err != nil {
					b.Fatal(err)
				}
				sinkEnvelope = e
			}
		})
		// The baseline is a naive classifier: utf8.Valid, Unmarshal into a map, then the
		// rule 5-6 checks on the map (it does not check member types strictly).
		b.Run(p.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(p.payload)))
			for b.Loop() {
				if !utf8.Valid(p.payload) {
					b.Fatal("invalid UTF-8")
				}
				var m map[string]any
				if err := json.Unmarshal(p.payload, &m); err != nil {
					b.Fatal(err)
				}
				job, _ := m["job"].(string)
				trace, _ := m["trace_id"].(string)
				_, isObj := m["data"].(map[string]any)
				meta, _ := m["meta"].(map[string]any)
				if envelope.IsBlank(job) || envelope.IsBlank(trace) || !isObj || meta["schema_version"] != float64(1) {
					b.Fatal("not acceptable")
				}
				sinkMap = m
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, p := range benchPayloads(b) {
		e, err := envelope.Decode(p.payload)
		if err != nil {
			b.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(p.payload, &m); err != nil {
			b.Fatal(err)
		}
		b.Run(p.name+"/sdk", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := e.Encode()
				if err != nil {
					b.Fatal(err)
				}
				sinkBytes = out
			}
		})
		b.Run(p.name+"/sdk-append", func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 2*len(p.payload))
			for b.Loop() {
				out, err := e.AppendEncode(buf[:0])
				if err != nil {
					b.Fatal(err)
				}
				sinkBytes = out
			}
		})
		b.Run(p.name+"/encoding-json", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				out, err := json.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				sinkBytes = out
			}
		})
	}
}

// BenchmarkClassifyUnknownKeys shows that the cost per unknown key does not grow with their
// number (ns/op grows 10× per step, MB/s stays flat); it was quadratic before.
func BenchmarkClassifyUnknownKeys(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		payload := unknownKeysBody(n)
		b.Run(strconv.Itoa(n/1000)+"k", func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				e, err := envelope.Classify(payload)
				if err != nil {
					b.Fatal(err)
				}
				sinkEnvelope = e
			}
		})
	}
}

type benchOrder struct {
	OrderID  int64    `json:"order_id"`
	Customer string   `json:"customer"`
	Total    float64  `json:"total"`
	Paid     bool     `json:"paid"`
	Tags     []string `json:"tags"`
}

// orderMap is the data of an order-created message as a producer builds it: a map with a
// nested map and slice. It is only read.
var orderMap = map[string]any{
	"order_id": 1042, "customer": "Zoë <zoe@example.com>", "total": 99.95, "paid": true,
	"tags": []any{"new", "priority"}, "address": map[string]any{"city": "İstanbul", "zip": "34000"},
}

// makeAndEncode is the producer's share of a publish: Make with data, then the encoding
// into buf, reused (AppendEncode, as the publisher does).
func makeAndEncode(buf []byte, data any) ([]byte, error) {
	e, err := envelope.Make("urn:babel:orders:created", data, envelope.WithQueue("orders"))
	if err != nil {
		return buf, err
	}
	return e.AppendEncode(buf[:0])
}

// BenchmarkMake is the producer's share of a publish (makeAndEncode) with the common kinds
// of data.
func BenchmarkMake(b *testing.B) {
	cases := []struct {
		name string
		data any
	}{
		{"map", orderMap},
		{"struct", benchOrder{OrderID: 1042, Customer: "Zoë <zoe@example.com>", Total: 99.95, Paid: true, Tags: []string{"new", "priority"}}},
		{"raw", json.RawMessage(`{"order_id":1042,"customer":"Zoë <zoe@example.com>","total":99.95,"paid":true,"tags":["new","priority"]}`)},
		{"nil", nil},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 0, 1024)
			for b.Loop() {
				var err error
				if buf, err = makeAndEncode(buf, c.data); err != nil {
					b.Fatal(err)
				}
			}
			sinkBytes = buf
		})
	}
}
