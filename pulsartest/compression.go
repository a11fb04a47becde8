package pulsartest

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"io"

	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// maxUncompressedSize bounds what uncompress allocates for one entry: Pulsar's largest message (5 MiB by
// default) with room to spare; an entry claiming more is refused rather than trusted.
const maxUncompressedSize = 64 << 20

// uncompress returns the payload of an entry stored with codec, whose metadata says it is size bytes
// uncompressed. The admin API answers uncompressed payloads, as Pulsar's does; the dispatcher never calls this,
// since the broker delivers entries as the producer stored them. The formats are those of the clients: an LZ4
// block without a frame, a zlib stream, a ZSTD frame and a Snappy block.
func uncompress(codec wire.CompressionType, payload []byte, size int) ([]byte, error) {
	if codec == wire.CompressionType_NONE {
		return payload, nil
	}
	if size < 0 || size > maxUncompressedSize {
		return nil, fmt.Errorf("pulsartest: uncompressed size %d out of range", size)
	}
	out, err := decode(codec, payload, size)
	if err == nil && len(out) != size {
		// As Pulsar's codecs, which decode into a buffer of the size the metadata gives.
		return nil, fmt.Errorf("pulsartest: %v: %d bytes uncompressed, the metadata says %d", codec, len(out), size)
	}
	return out, err
}

// decode uncompresses payload with codec, reading at most size+1 bytes where the format
// allows it (one more tells a longer payload from one of the right size).
func decode(codec wire.CompressionType, payload []byte, size int) ([]byte, error) {
	switch codec {
	case wire.CompressionType_LZ4:
		out := make([]byte, size)
		n, err := lz4.UncompressBlock(payload, out)
		if err != nil {
			return nil, fmt.Errorf("pulsartest: LZ4: %w", err)
		}
		return out[:n], nil
	case wire.CompressionType_ZLIB:
		r, err := zlib.NewReader(bytes.NewReader(payload))
		if err != nil {
			return nil, fmt.Errorf("pulsartest: ZLIB: %w", err)
		}
		out, err := io.ReadAll(io.LimitReader(r, int64(size)+1))
		if err != nil {
			return nil, fmt.Errorf("pulsartest: ZLIB: %w", err)
		}
		return out, nil
	case wire.CompressionType_ZSTD:
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxUncompressedSize))
		if err != nil {
			return nil, fmt.Errorf("pulsartest: ZSTD: %w", err)
		}
		defer d.Close()
		out, err := d.DecodeAll(payload, make([]byte, 0, size))
		if err != nil {
			return nil, fmt.Errorf("pulsartest: ZSTD: %w", err)
		}
		return out, nil
	case wire.CompressionType_SNAPPY:
		n, err := snappy.DecodedLen(payload)
		if err != nil {
			return nil, fmt.Errorf("pulsartest: SNAPPY: %w", err)
		}
		if n > maxUncompressedSize {
			return nil, fmt.Errorf("pulsartest: SNAPPY: decoded length %d out of range", n)
		}
		out, err := snappy.Decode(nil, payload)
		if err != nil {
			return nil, fmt.Errorf("pulsartest: SNAPPY: %w", err)
		}
		return out, nil
	default:
		return nil, fmt.Errorf("pulsartest: unknown compression %v", codec)
	}
}
