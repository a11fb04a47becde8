package pulsartest

import (
	"bytes"
	"compress/zlib"
	"testing"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// compressWith compresses data as a producer with codec stores it.
func compressWith(t *testing.T, codec wire.CompressionType, data []byte) []byte {
	t.Helper()
	switch codec {
	case wire.CompressionType_LZ4:
		out := make([]byte, lz4.CompressBlockBound(len(data)))
		n, err := lz4.CompressBlock(data, out, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 { // incompressible: the clients store it as a literal-only block
			return lz4Literal(data)
		}
		return out[:n]
	case wire.CompressionType_ZLIB:
		var b bytes.Buffer
		w := zlib.NewWriter(&b)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	case wire.CompressionType_ZSTD:
		e, err := zstd.NewWriter(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = e.Close() }()
		return e.EncodeAll(data, nil)
	case wire.CompressionType_SNAPPY:
		return snappy.Encode(nil, data)
	default:
		return data
	}
}

// lz4Literal is data as one LZ4 block of literals only.
func lz4Literal(data []byte) []byte {
	n := len(data)
	out := []byte{0}
	if n < 15 {
		out[0] = byte(n << 4)
	} else {
		out[0] = 0xF0
		for n -= 15; n >= 255; n -= 255 {
			out = append(out, 255)
		}
		out = append(out, byte(n))
	}
	return append(out, data...)
}

var codecs = []wire.CompressionType{
	wire.CompressionType_NONE, wire.CompressionType_LZ4, wire.CompressionType_ZLIB,
	wire.CompressionType_ZSTD, wire.CompressionType_SNAPPY,
}

// FuzzUncompress: what a producer compressed comes back as it was, with every codec; and
// bytes that no producer wrote (a peek reads what any client stored) give an error, never
// a panic or another size than the entry's metadata says.
func FuzzUncompress(f *testing.F) {
	f.Add([]byte(`{"job":"urn:babel:orders:created","data":{}}`), []byte{0xff, 0x00}, 16)
	f.Add([]byte{}, []byte{0x28, 0xb5, 0x2f, 0xfd}, 0)
	f.Add(bytes.Repeat([]byte("ab"), 100), []byte{0xf0, 0xff}, 1<<20)
	f.Fuzz(func(t *testing.T, data, junk []byte, size int) {
		for _, codec := range codecs {
			got, err := uncompress(codec, compressWith(t, codec, data), len(data))
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%v: round trip of %d bytes: %v (got %d bytes)", codec, len(data), err, len(got))
			}
			out, err := uncompress(codec, junk, size)
			if err == nil && codec != wire.CompressionType_NONE && len(out) != size {
				t.Fatalf("%v: %d bytes out for an entry of %d", codec, len(out), size)
			}
		}
	})
}
