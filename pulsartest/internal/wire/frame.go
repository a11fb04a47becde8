package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"google.golang.org/protobuf/proto"
)

// Magic numbers that open the optional blocks of a payload frame.
const (
	MagicCrc32c              = 0x0e01
	MagicBrokerEntryMetadata = 0x0e02
)

// FramePadding is the slack the client allows above max_message_size for the command and metadata.
const FramePadding = 10 * 1024

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Errors returned by the frame codec.
var (
	ErrFrameTooLarge = errors.New("wire: frame too large")
	ErrBadFrame      = errors.New("wire: malformed frame")
	ErrChecksum      = errors.New("wire: checksum mismatch")
)

// Checksum returns the CRC32-C of b, as used in payload frames.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// Frame is one decoded frame: the command and, for SEND and MESSAGE, the payload bytes that follow it
// (starting at the 0x0e01 magic for frames from a client).
type Frame struct {
	Cmd     *BaseCommand
	Payload []byte
}

// ReadFrame reads one frame from r. maxFrame bounds totalSize.
func ReadFrame(r io.Reader, maxFrame int) (Frame, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return Frame{}, fmt.Errorf("wire: read frame size: %w", err)
	}
	total := int(binary.BigEndian.Uint32(hdr[:]))
	if total > maxFrame {
		return Frame{}, fmt.Errorf("%w: %d > %d bytes", ErrFrameTooLarge, total, maxFrame)
	}
	if total < 4 {
		return Frame{}, fmt.Errorf("%w: total size %d", ErrBadFrame, total)
	}
	buf := make([]byte, total)
	if _, err := io.ReadFull(r, buf); err != nil {
		return Frame{}, fmt.Errorf("wire: read frame: %w", err)
	}
	cmdSize := int(binary.BigEndian.Uint32(buf))
	if cmdSize > total-4 {
		return Frame{}, fmt.Errorf("%w: command size %d of %d", ErrBadFrame, cmdSize, total)
	}
	cmd := &BaseCommand{}
	if err := proto.Unmarshal(buf[4:4+cmdSize], cmd); err != nil {
		return Frame{}, fmt.Errorf("%w: %w", ErrBadFrame, err)
	}
	f := Frame{Cmd: cmd}
	if rest := buf[4+cmdSize:]; len(rest) > 0 {
		f.Payload = rest
	}
	return f, nil
}

// EncodeCommand serializes a frame without payload.
func EncodeCommand(cmd *BaseCommand) ([]byte, error) {
	return EncodePayloadCommand(cmd, nil, nil)
}

// EncodePayloadCommand serializes a frame whose command is followed by an optional BrokerEntryMetadata block
// (brokerMeta, nil for none) and the stored entry bytes (from the 0x0e01 magic on).
func EncodePayloadCommand(cmd *BaseCommand, brokerMeta *BrokerEntryMetadata, entry []byte) ([]byte, error) {
	cb, err := proto.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("wire: marshal %v: %w", cmd.GetType(), err)
	}
	var mb []byte
	if brokerMeta != nil {
		if mb, err = proto.Marshal(brokerMeta); err != nil {
			return nil, fmt.Errorf("wire: marshal broker entry metadata: %w", err)
		}
	}
	size := 4 + len(cb) + len(entry)
	if brokerMeta != nil {
		size += 6 + len(mb)
	}
	out := make([]byte, 4, 4+size)
	binary.BigEndian.PutUint32(out, uint32(size))             //nolint:gosec // frame sizes are bounded by max_message_size
	out = binary.BigEndian.AppendUint32(out, uint32(len(cb))) //nolint:gosec // bounded as above
	out = append(out, cb...)
	if brokerMeta != nil {
		out = binary.BigEndian.AppendUint16(out, MagicBrokerEntryMetadata)
		out = binary.BigEndian.AppendUint32(out, uint32(len(mb))) //nolint:gosec // bounded as above
		out = append(out, mb...)
	}
	return append(out, entry...), nil
}

// ParsePayload checks the checksum of a client payload (starting at the 0x0e01 magic) and decodes its
// MessageMetadata. The returned metadata is parsed leniently: missing required fields are tolerated.
func ParsePayload(p []byte) (*MessageMetadata, error) {
	if len(p) < 10 || binary.BigEndian.Uint16(p) != MagicCrc32c {
		return nil, fmt.Errorf("%w: payload without crc32c magic", ErrBadFrame)
	}
	want := binary.BigEndian.Uint32(p[2:])
	if got := Checksum(p[6:]); got != want {
		return nil, fmt.Errorf("%w: got %08x, frame says %08x", ErrChecksum, got, want)
	}
	metaSize := int(binary.BigEndian.Uint32(p[6:]))
	if metaSize > len(p)-10 {
		return nil, fmt.Errorf("%w: metadata size %d of %d", ErrBadFrame, metaSize, len(p)-10)
	}
	md := &MessageMetadata{}
	if err := (proto.UnmarshalOptions{AllowPartial: true}).Unmarshal(p[10:10+metaSize], md); err != nil {
		return nil, fmt.Errorf("%w: metadata: %w", ErrBadFrame, err)
	}
	return md, nil
}

// BuildPayload builds a client-style payload block (magic, checksum, metadata, body); used by tests.
func BuildPayload(md *MessageMetadata, body []byte) ([]byte, error) {
	mb, err := proto.Marshal(md)
	if err != nil {
		return nil, fmt.Errorf("wire: marshal metadata: %w", err)
	}
	inner := binary.BigEndian.AppendUint32(nil, uint32(len(mb))) //nolint:gosec // test-sized
	inner = append(inner, mb...)
	inner = append(inner, body...)
	out := binary.BigEndian.AppendUint16(nil, MagicCrc32c)
	out = binary.BigEndian.AppendUint32(out, Checksum(inner))
	return append(out, inner...), nil
}
