package dlq

import (
	"encoding/binary"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// single is one message of a batch entry.
type single struct {
	props       map[string]string
	key         string
	orderingKey string
	payload     []byte
}

// errBatch says that a batch payload is malformed.
var errBatch = errors.New("malformed batch")

// splitBatch splits the uncompressed payload of a batch entry of n messages: each is a
// 4-byte big-endian length, a SingleMessageMetadata of that length, then payload_size bytes.
func splitBatch(data []byte, n int) ([]single, error) {
	out := make([]single, 0, min(n, 1024))
	for i := range n {
		if len(data) < 4 {
			return nil, fmt.Errorf("%w: message %d: no metadata size", errBatch, i)
		}
		size := binary.BigEndian.Uint32(data)
		data = data[4:]
		if uint64(size) > uint64(len(data)) {
			return nil, fmt.Errorf("%w: message %d: metadata size %d beyond the payload", errBatch, i, size)
		}
		s, payloadSize, err := parseSingle(data[:size])
		if err != nil {
			return nil, fmt.Errorf("%w: message %d: %w", errBatch, i, err)
		}
		data = data[size:]
		if payloadSize > uint64(len(data)) {
			return nil, fmt.Errorf("%w: message %d: payload size %d beyond the payload", errBatch, i, payloadSize)
		}
		s.payload, data = data[:payloadSize], data[payloadSize:]
		out = append(out, s)
	}
	return out, nil
}

// parseErr wraps a protowire decoding error.
func parseErr(n int) error { return fmt.Errorf("protobuf: %w", protowire.ParseError(n)) }

// parseSingle decodes the fields of a SingleMessageMetadata that a dead-letter message
// needs: properties (1), partition_key (2), payload_size (3), ordering_key (7).
func parseSingle(b []byte) (single, uint64, error) {
	s := single{props: map[string]string{}}
	var payloadSize uint64
	seenSize := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, 0, parseErr(n)
		}
		b = b[n:]
		switch {
		case num == 1 && typ == protowire.BytesType:
			kv, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return s, 0, parseErr(m)
			}
			k, v, err := parseKeyValue(kv)
			if err != nil {
				return s, 0, err
			}
			s.props[k] = v
			b = b[m:]
		case (num == 2 || num == 7) && typ == protowire.BytesType:
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return s, 0, parseErr(m)
			}
			if num == 2 {
				s.key = string(v)
			} else {
				s.orderingKey = string(v)
			}
			b = b[m:]
		case num == 3 && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return s, 0, parseErr(m)
			}
			payloadSize, seenSize = uint64(uint32(v)), true //nolint:gosec // an int32 field
			b = b[m:]
		default:
			m := protowire.ConsumeFieldValue(num, typ, b)
			if m < 0 {
				return s, 0, parseErr(m)
			}
			b = b[m:]
		}
	}
	if !seenSize {
		return s, 0, errors.New("no payload_size")
	}
	return s, payloadSize, nil
}

func parseKeyValue(b []byte) (key, value string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", "", parseErr(n)
		}
		b = b[n:]
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return "", "", parseErr(m)
			}
			if num == 1 {
				key = string(v)
			} else {
				value = string(v)
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", "", parseErr(m)
		}
		b = b[m:]
	}
	return key, value, nil
}
