package wire_test

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// checksummed returns a client payload block around inner (metadata size, metadata, body):
// the 0x0e01 magic and the checksum of inner, whatever inner holds.
func checksummed(inner []byte) []byte {
	out := binary.BigEndian.AppendUint16(nil, wire.MagicCrc32c)
	out = binary.BigEndian.AppendUint32(out, wire.Checksum(inner))
	return append(out, inner...)
}

func TestPayloadFrameRoundTrip(t *testing.T) {
	md := &wire.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(3), PublishTime: proto.Uint64(42),
		NumMessagesInBatch: proto.Int32(2), PartitionKey: proto.String("k"),
	}
	for _, body := range [][]byte{[]byte("body"), nil} { // an empty body ends where the metadata ends
		payload, err := wire.BuildPayload(md, body)
		require.NoError(t, err)
		got, err := wire.ParsePayload(payload)
		require.NoError(t, err, "body %q", body)
		assert.True(t, proto.Equal(md, got), "body %q", body)
	}
	// The smallest payload: no metadata fields (parsed leniently) and no body.
	got, err := wire.ParsePayload(checksummed([]byte{0, 0, 0, 0}))
	require.NoError(t, err)
	assert.True(t, proto.Equal(&wire.MessageMetadata{}, got))

	payload, err := wire.BuildPayload(md, []byte("body"))
	require.NoError(t, err)
	cmd := &wire.BaseCommand{Type: wire.BaseCommand_MESSAGE.Enum(), Message: &wire.CommandMessage{
		ConsumerId: proto.Uint64(1), MessageId: &wire.MessageIdData{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(2)},
	}}
	brokerMeta := &wire.BrokerEntryMetadata{Index: proto.Uint64(9)}
	frame, err := wire.EncodePayloadCommand(cmd, brokerMeta, payload)
	require.NoError(t, err)
	f, err := wire.ReadFrame(bytes.NewReader(frame), 1<<20)
	require.NoError(t, err)
	assert.True(t, proto.Equal(cmd, f.Cmd))
	require.Equal(t, []byte{0x0e, 0x02}, f.Payload[:2], "broker entry metadata first")
	size := int(binary.BigEndian.Uint32(f.Payload[2:]))
	gotMeta := &wire.BrokerEntryMetadata{}
	require.NoError(t, proto.Unmarshal(f.Payload[6:6+size], gotMeta))
	assert.True(t, proto.Equal(brokerMeta, gotMeta), "the broker entry metadata block holds the metadata")
	assert.Equal(t, payload, f.Payload[6+size:], "entry bytes forwarded verbatim")
}

func TestParsePayloadRejectsCorruption(t *testing.T) {
	payload, err := wire.BuildPayload(&wire.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1),
	}, []byte("body"))
	require.NoError(t, err)
	flipped := bytes.Clone(payload)
	flipped[len(flipped)-1] ^= 1
	wrongMagic := bytes.Clone(payload) // the checksum does not cover the magic
	wrongMagic[1] = 0x02
	for _, tc := range []struct {
		name    string
		payload []byte
		err     error
		msg     string
	}{
		{"a flipped body bit", flipped, wire.ErrChecksum, "checksum mismatch"},
		{"too short", []byte{1, 2, 3}, wire.ErrBadFrame, "without crc32c magic"},
		{"too short, with the magic", []byte{0x0e, 0x01, 0, 0}, wire.ErrBadFrame, "without crc32c magic"},
		{"another magic", wrongMagic, wire.ErrBadFrame, "without crc32c magic"},
		{"a metadata size beyond the payload", checksummed([]byte{0, 0, 0, 5, 1, 2, 3}), wire.ErrBadFrame, "metadata size 5 of 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := wire.ParsePayload(tc.payload)
			require.ErrorIs(t, err, tc.err)
			assert.ErrorContains(t, err, tc.msg)
		})
	}
}

func TestReadFrameLimits(t *testing.T) {
	cmd := &wire.BaseCommand{Type: wire.BaseCommand_PING.Enum(), Ping: &wire.CommandPing{}}
	frame, err := wire.EncodeCommand(cmd)
	require.NoError(t, err)
	total := len(frame) - 4 // the size field does not count itself
	// A CONNECTED without its required server_version is rejected like the client would.
	bad, err := proto.Marshal(&wire.BaseCommand{Type: wire.BaseCommand_CONNECTED.Enum()})
	require.NoError(t, err)
	incomplete := append([]byte{0, 0, 0, byte(4 + len(bad) + 2), 0, 0, 0, byte(len(bad) + 2)}, bad...)
	incomplete = append(incomplete, 0x1a, 0x00) // field 3 (connected), empty message
	// A command size one byte beyond the frame.
	overlong := bytes.Clone(frame)
	binary.BigEndian.PutUint32(overlong[4:], uint32(total-3))
	for _, tc := range []struct {
		name     string
		frame    []byte
		maxFrame int
		err      error
	}{
		{"exactly maxFrame bytes", frame, total, nil},
		{"one byte over maxFrame", frame, total - 1, wire.ErrFrameTooLarge},
		{"a command size beyond the frame", overlong, 1 << 20, wire.ErrBadFrame},
		{"a command without a required field", incomplete, 1 << 20, wire.ErrBadFrame},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := wire.ReadFrame(bytes.NewReader(tc.frame), tc.maxFrame)
			if tc.err != nil {
				require.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.True(t, proto.Equal(cmd, f.Cmd))
			assert.Nil(t, f.Payload, "a frame without payload has none")
		})
	}
}
