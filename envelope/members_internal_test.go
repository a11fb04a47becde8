package envelope

import (
	"bytes"
	"hash/maphash"
	"strconv"
	"strings"
	"testing"
)

// TestUnknownKeysAreIndexed guards the quadratic-decode fix (before it, 100,000 unknown keys
// took about 19 s: each key was compared with every earlier one) by the structure that makes
// decoding linear, not by a clock: a member table longer than linearMembers has a hash index
// at most half full, and finding a member takes a couple of probes on average, so each key
// costs O(1) expected. It replaced a test that compared the times of 50,000 and 100,000
// keys, which a loaded CI machine failed once (18.9 ms against 16.7 ms, above its 3× bound)
// though the decoder was linear; the cost itself is BenchmarkClassifyUnknownKeys'.
func TestUnknownKeysAreIndexed(t *testing.T) {
	t.Parallel()
	const n = 100_000
	var b bytes.Buffer
	b.WriteString(`{"job":"urn:a:b","trace_id":"t","data":{},"meta":{"schema_version":1}`)
	for i := range n {
		b.WriteString(`,"x` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	b.WriteByte('}')
	d := decoder{s: b.Bytes()}
	if err := d.frame(); err != nil {
		t.Fatal(err)
	}
	tbl := &d.tables[levelTop]
	if len(tbl.members) != n {
		t.Fatalf("%d unknown members kept, want %d", len(tbl.members), n)
	}
	slots := tbl.index.slots
	if slots == nil {
		t.Fatal("no index for a table of 100,000 members: each key is compared with every earlier one")
	}
	if 2*len(tbl.members) > len(slots) {
		t.Fatalf("index more than half full: %d members in %d slots", len(tbl.members), len(slots))
	}
	mask := uint64(len(slots)) - 1
	probes := 0
	for k := range tbl.members {
		h := maphash.String(indexSeed, d.memberName(tbl, k))
		for i := h & mask; ; i = (i + 1) & mask {
			probes++
			if int(slots[i]&posMask) == k+1 {
				break
			}
			if slots[i] == 0 {
				t.Fatalf("member %d is not in the index", k)
			}
		}
	}
	if avg := float64(probes) / n; avg > 4 {
		t.Fatalf("%.2f probes per member on average: the index does not make lookups O(1)", avg)
	}
}

// TestRepeatedMemberIsCountedOnce holds the size of the envelope's buffer to what it keeps:
// when an unknown key comes again, the earlier occurrence's key and value leave the count
// that sizes the buffer (keptLen), so a body whose long value is overridden by a short one
// gets the buffer of a body with the short one alone.
func TestRepeatedMemberIsCountedOnce(t *testing.T) {
	t.Parallel()
	key := `,"` + strings.Repeat("k", 100) + `":`
	long, short := key+`"`+strings.Repeat("v", 1000)+`"`, key+"1"
	kept := func(members string) int {
		d := decoder{s: []byte(`{"job":"urn:a:b"` + members + `}`)}
		if err := d.frame(); err != nil {
			t.Fatal(err)
		}
		return d.keptLen()
	}
	if once, twice := kept(short), kept(long+short); twice != once {
		t.Fatalf("%d bytes kept for a member overridden, %d for the last occurrence alone", twice, once)
	}
}
