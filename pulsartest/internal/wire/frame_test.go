package wire_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

func TestPayloadFrameRoundTrip(t *testing.T) {
	md := &wire.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(3), PublishTime: proto.Uint64(42),
		NumMessagesInBatch: proto.Int32(2), PartitionKey: proto.String("k"),
	}
	payload, err := wire.BuildPayload(md, []byte("body"))
	require.NoError(t, err)
	got, err := wire.ParsePayload(payload)
	require.NoError(t, err)
	assert.True(t, proto.Equal(md, got))

	cmd := &wire.BaseCommand{Type: wire.BaseCommand_MESSAGE.Enum(), Message: &wire.CommandMessage{
		ConsumerId: proto.Uint64(1), MessageId: &wire.MessageIdData{LedgerId: proto.Uint64(1), EntryId: proto.Uint64(2)},
	}}
	frame, err := wire.EncodePayloadCommand(cmd, &wire.BrokerEntryMetadata{Index: proto.Uint64(9)}, payload)
	require.NoError(t, err)
	f, err := wire.ReadFrame(bytes.NewReader(frame), 1<<20)
	require.NoError(t, err)
	assert.True(t, proto.Equal(cmd, f.Cmd))
	require.Equal(t, []byte{0x0e, 0x02}, f.Payload[:2], "broker entry metadata first")
	assert.True(t, bytes.HasSuffix(f.Payload, payload), "entry bytes forwarded verbatim")
}

func TestParsePayloadRejectsCorruption(t *testing.T) {
	payload, err := wire.BuildPayload(&wire.MessageMetadata{
		ProducerName: proto.String("p"), SequenceId: proto.Uint64(0), PublishTime: proto.Uint64(1),
	}, []byte("body"))
	require.NoError(t, err)
	payload[len(payload)-1] ^= 1
	_, err = wire.ParsePayload(payload)
	require.ErrorIs(t, err, wire.ErrChecksum)
	_, err = wire.ParsePayload([]byte{1, 2, 3})
	require.ErrorIs(t, err, wire.ErrBadFrame)
}

func TestReadFrameLimits(t *testing.T) {
	cmd := &wire.BaseCommand{Type: wire.BaseCommand_PING.Enum(), Ping: &wire.CommandPing{}}
	frame, err := wire.EncodeCommand(cmd)
	require.NoError(t, err)
	_, err = wire.ReadFrame(bytes.NewReader(frame), 2)
	require.ErrorIs(t, err, wire.ErrFrameTooLarge)
	// A CONNECTED without its required server_version is rejected like the client would.
	bad, err := proto.Marshal(&wire.BaseCommand{Type: wire.BaseCommand_CONNECTED.Enum()})
	require.NoError(t, err)
	incomplete := append([]byte{0, 0, 0, byte(4 + len(bad) + 2), 0, 0, 0, byte(len(bad) + 2)}, bad...)
	incomplete = append(incomplete, 0x1a, 0x00) // field 3 (connected), empty message
	_, err = wire.ReadFrame(bytes.NewReader(incomplete), 1<<20)
	require.ErrorIs(t, err, wire.ErrBadFrame)
}
