package envelope

import (
	"encoding/json"
	"testing"
)

// sinkParts keeps the results of BenchmarkClassifyParts alive.
var sinkParts *Envelope

// BenchmarkClassifyParts splits Classify of a compact envelope as the SDKs send it (Make,
// then Encode, with the order-created fixture's data and queue) into its parts, each run on
// its own, so that what a call costs can be added up:
//
//   - scan: the decoder's one pass over the payload (frame), which allocates nothing: the
//     canonical path, the body being of the encoders' shape;
//   - scan-general: the same pass on the general path, which any other shape takes (their
//     difference is what the canonical path saves);
//   - allocation: the envelope's one allocation, of the size Classify makes it (newEnvelope),
//     with the garbage collection that allocating at Classify's rate brings;
//   - whole: Classify.
//
// whole − scan − allocation is the copy into the allocation and the checks of rules 5–6.
//
//	go test -run='^$' -bench=ClassifyParts -count=8 ./envelope
func BenchmarkClassifyParts(b *testing.B) {
	env, err := Make("urn:babel:orders:created", json.RawMessage(`{"order_id":1042}`), WithQueue("orders"))
	if err != nil {
		b.Fatal(err)
	}
	payload, err := env.Encode()
	if err != nil {
		b.Fatal(err)
	}
	d := decoder{s: payload}
	if err := d.frame(); err != nil {
		b.Fatal(err)
	}
	size := d.keptLen()
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			d := decoder{s: payload}
			if err := d.frame(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("scan-general", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			d := decoder{s: payload}
			if err := d.general(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("allocation", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkParts, _ = newEnvelope(size)
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			e, err := Classify(payload)
			if err != nil {
				b.Fatal(err)
			}
			sinkParts = e
		}
	})
}
