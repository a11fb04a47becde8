package pulsar

import (
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// fakeMessage implements the whole apulsar.Message interface with plain fields, so that a
// call the pipeline should not make returns a zero value instead of a nil-pointer panic.
type fakeMessage struct {
	topic       string
	props       map[string]string
	payload     []byte
	key         string
	orderingKey string
	redelivery  uint32
	publishTime time.Time
}

var _ apulsar.Message = (*fakeMessage)(nil)

func (m *fakeMessage) Topic() string                                  { return m.topic }
func (*fakeMessage) ProducerName() string                             { return "fake-producer" }
func (m *fakeMessage) Properties() map[string]string                  { return m.props }
func (m *fakeMessage) Payload() []byte                                { return m.payload }
func (*fakeMessage) IsNullValue() bool                                { return false }
func (*fakeMessage) ID() apulsar.MessageID                            { return apulsar.EarliestMessageID() }
func (m *fakeMessage) PublishTime() time.Time                         { return m.publishTime }
func (*fakeMessage) EventTime() time.Time                             { return time.Time{} }
func (m *fakeMessage) Key() string                                    { return m.key }
func (m *fakeMessage) OrderingKey() string                            { return m.orderingKey }
func (m *fakeMessage) RedeliveryCount() uint32                        { return m.redelivery }
func (*fakeMessage) IsReplicated() bool                               { return false }
func (*fakeMessage) GetReplicatedFrom() string                        { return "" }
func (*fakeMessage) GetSchemaValue(any) error                         { return errNoSchema }
func (*fakeMessage) SchemaVersion() []byte                            { return nil }
func (*fakeMessage) GetEncryptionContext() *apulsar.EncryptionContext { return nil }
func (*fakeMessage) Index() *uint64                                   { return nil }
func (*fakeMessage) BrokerPublishTime() *time.Time                    { return nil }

var errNoSchema = fakeError("fake message: no schema value")

type fakeError string

func (e fakeError) Error() string { return string(e) }
