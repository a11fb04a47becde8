package pulsartest

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// The read-only admin endpoints: schemas, message by id, and Pulsar's stats JSON of topics and partitioned
// topics (registered in admin_namespaces.go).

// schemaTypeNames are Pulsar's REST names of the wire schema types.
var schemaTypeNames = map[wire.Schema_Type]string{
	wire.Schema_Bool: "BOOLEAN", wire.Schema_KeyValue: "KEY_VALUE", wire.Schema_ProtobufNative: "PROTOBUF_NATIVE",
	wire.Schema_LocalDate: "LOCAL_DATE", wire.Schema_LocalTime: "LOCAL_TIME", wire.Schema_LocalDateTime: "LOCAL_DATE_TIME",
}

func schemaTypeName(t wire.Schema_Type) string {
	if n, ok := schemaTypeNames[t]; ok {
		return n
	}
	return strings.ToUpper(t.String())
}

func (a *adminServer) schemaBase(r *http.Request) (string, error) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		return "", err
	}
	base, _ := splitPartition(fq)
	if a.b.partitions(base) == 0 {
		base = fq
	}
	return base, nil
}

func (a *adminServer) getSchema(w http.ResponseWriter, r *http.Request) {
	base, err := a.schemaBase(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	var version []byte
	if v := r.PathValue("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeReason(w, http.StatusBadRequest, "pulsartest: schema version "+strconv.Quote(v))
			return
		}
		version = schemaVersionBytes(int(n))
	}
	s, v, ok := a.b.getSchema(base, version)
	if !ok {
		writeReason(w, http.StatusNotFound, "Schema not found")
		return
	}
	props := map[string]string{}
	for _, kv := range s.GetProperties() {
		props[kv.GetKey()] = kv.GetValue()
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"version": binary.BigEndian.Uint64(v), "type": schemaTypeName(s.GetType()), "timestamp": 0,
		"data": string(s.GetSchemaData()), "properties": props,
	})
}

// deleteSchema deletes every version of the topic's schema, answering the deleted version like Pulsar.
func (a *adminServer) deleteSchema(w http.ResponseWriter, r *http.Request) {
	base, err := a.schemaBase(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	a.b.mu.Lock()
	n := len(a.b.schemas[base])
	delete(a.b.schemas, base)
	a.b.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]int{"version": n})
}

// adminTime is how Pulsar formats connectedSince and the X-Pulsar-*-time headers.
const adminTime = "2006-01-02T15:04:05.000-07:00"

func (a *adminServer) messageByID(w http.ResponseWriter, r *http.Request) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	ledger, err1 := strconv.ParseUint(r.PathValue("ledger"), 10, 64)
	eid, err2 := strconv.ParseInt(r.PathValue("entry"), 10, 64)
	if err1 != nil || err2 != nil || eid < 0 {
		writeReason(w, http.StatusPreconditionFailed, "pulsartest: invalid message id")
		return
	}
	if a.b.partitions(fq) > 0 {
		writeReason(w, http.StatusMethodNotAllowed, "Get message ID is not allowed on partitioned-topic")
		return
	}
	t, err := a.b.getTopic(fq, false)
	if err != nil {
		writeReason(w, http.StatusNotFound, topicNotFound(fq))
		return
	}
	t.mu.Lock()
	var raw []byte
	if e := t.entry(eid); e != nil && t.ledgerID == ledger {
		raw = e.raw
	}
	t.mu.Unlock()
	if raw == nil {
		writeReason(w, http.StatusNotFound, fmt.Sprintf("Message id %d:%d not found", ledger, eid))
		return
	}
	md, payload, ok := entryResponse(w, raw, "reading", ledger, eid)
	if !ok {
		return
	}
	h := w.Header()
	if md.PublishTime != nil {
		h.Set("X-Pulsar-publish-time", time.UnixMilli(int64(md.GetPublishTime())).UTC().Format(adminTime)) //nolint:gosec // ms
	}
	if md.NumMessagesInBatch != nil {
		h.Set("X-Pulsar-num-batch-message", strconv.Itoa(int(md.GetNumMessagesInBatch())))
	}
	for _, kv := range md.GetProperties() {
		h.Set("X-Pulsar-PROPERTY-"+kv.GetKey(), headerText(kv.GetValue()))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(payload) // the client went away: nothing else to tell it
}

// Pulsar's stats JSON (TopicStats, PublisherStats, SubscriptionStats, ConsumerStats): real counts, rates
// present and zero.

type publisherStatsJSON struct {
	AccessMode      string            `json:"accessMode"`
	MsgRateIn       float64           `json:"msgRateIn"`
	MsgThroughputIn float64           `json:"msgThroughputIn"`
	AverageMsgSize  float64           `json:"averageMsgSize"`
	ChunkedMsgRate  float64           `json:"chunkedMessageRate"`
	ProducerID      uint64            `json:"producerId"`
	PartialProducer bool              `json:"supportsPartialProducer"`
	ProducerName    string            `json:"producerName"`
	Address         string            `json:"address"`
	ConnectedSince  string            `json:"connectedSince"`
	ClientVersion   string            `json:"clientVersion"`
	Metadata        map[string]string `json:"metadata"`
}

type consumerStatsJSON struct {
	MsgRateOut          float64           `json:"msgRateOut"`
	MsgThroughputOut    float64           `json:"msgThroughputOut"`
	MsgRateRedeliver    float64           `json:"msgRateRedeliver"`
	MessageAckRate      float64           `json:"messageAckRate"`
	ChunkedMsgRate      float64           `json:"chunkedMessageRate"`
	ConsumerName        string            `json:"consumerName"`
	AvailablePermits    int64             `json:"availablePermits"`
	UnackedMessages     int64             `json:"unackedMessages"`
	AvgMessagesPerEntry int               `json:"avgMessagesPerEntry"`
	BlockedOnUnacked    bool              `json:"blockedConsumerOnUnackedMsgs"`
	Address             string            `json:"address"`
	ConnectedSince      string            `json:"connectedSince"`
	ClientVersion       string            `json:"clientVersion"`
	Metadata            map[string]string `json:"metadata"`
}

type subscriptionStatsJSON struct {
	MsgRateOut           float64             `json:"msgRateOut"`
	MsgThroughputOut     float64             `json:"msgThroughputOut"`
	MsgRateRedeliver     float64             `json:"msgRateRedeliver"`
	MsgRateExpired       float64             `json:"msgRateExpired"`
	MessageAckRate       float64             `json:"messageAckRate"`
	ChunkedMsgRate       float64             `json:"chunkedMessageRate"`
	MsgBacklog           int64               `json:"msgBacklog"`
	MsgBacklogNoDelayed  int64               `json:"msgBacklogNoDelayed"`
	MsgDelayed           int64               `json:"msgDelayed"`
	UnackedMessages      int64               `json:"unackedMessages"`
	BacklogSize          int64               `json:"backlogSize"`
	Type                 string              `json:"type"`
	ActiveConsumerName   string              `json:"activeConsumerName,omitempty"`
	IsDurable            bool                `json:"isDurable"`
	IsReplicated         bool                `json:"isReplicated"`
	AllowOutOfOrder      bool                `json:"allowOutOfOrderDelivery"`
	BlockedOnUnacked     bool                `json:"blockedSubscriptionOnUnackedMsgs"`
	Consumers            []consumerStatsJSON `json:"consumers"`
	SubscriptionProps    map[string]string   `json:"subscriptionProperties"`
	ConsumersAfterMarkDP map[string]string   `json:"consumersAfterMarkDeletePosition"`
}

type topicStatsJSON struct {
	MsgRateIn        float64                          `json:"msgRateIn"`
	MsgRateOut       float64                          `json:"msgRateOut"`
	MsgThroughputIn  float64                          `json:"msgThroughputIn"`
	MsgThroughputOut float64                          `json:"msgThroughputOut"`
	AverageMsgSize   float64                          `json:"averageMsgSize"`
	MsgInCounter     int64                            `json:"msgInCounter"`
	BytesInCounter   int64                            `json:"bytesInCounter"`
	MsgOutCounter    int64                            `json:"msgOutCounter"`
	StorageSize      int64                            `json:"storageSize"`
	BacklogSize      int64                            `json:"backlogSize"`
	Publishers       []publisherStatsJSON             `json:"publishers"`
	Subscriptions    map[string]subscriptionStatsJSON `json:"subscriptions"`
	Replication      map[string]any                   `json:"replication"`
	Deduplication    string                           `json:"deduplicationStatus"`
	Metadata         *struct {
		Partitions int `json:"partitions"`
	} `json:"metadata,omitempty"`
	Partitions map[string]topicStatsJSON `json:"partitions,omitempty"`
}

func newTopicStatsJSON() topicStatsJSON {
	return topicStatsJSON{
		Publishers: []publisherStatsJSON{}, Subscriptions: map[string]subscriptionStatsJSON{},
		Replication: map[string]any{}, Deduplication: "Disabled",
	}
}

func accessModeName(p *producer) string {
	if p.exclusive {
		return "Exclusive"
	}
	return "Shared"
}

// adminStats adds the topic's stats to st (summing over partitions).
func (t *topic) adminStats(st *topicStatsJSON) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st.MsgInCounter += t.msgCount
	for _, e := range t.entries {
		st.StorageSize += int64(len(e.raw))
	}
	st.BytesInCounter += st.StorageSize
	for p := range t.producers {
		st.Publishers = append(st.Publishers, publisherStatsJSON{
			AccessMode: accessModeName(p), ProducerID: p.id, ProducerName: p.name,
			Address: p.c.nc.RemoteAddr().String(), ConnectedSince: p.c.since.Format(adminTime),
			ClientVersion: p.c.clientVersion, Metadata: nonNilMap(p.metadata),
		})
	}
	var topicBacklog int64
	for name, s := range t.subs {
		ss := st.Subscriptions[name]
		ss.Type, ss.IsDurable, ss.AllowOutOfOrder = s.subType.String(), s.durable, s.allowOOO
		backlog := int64(s.backlogEntries())
		ss.MsgBacklog += backlog
		ss.MsgDelayed += int64(len(s.delayed))
		ss.MsgBacklogNoDelayed += backlog - int64(len(s.delayed))
		// As Pulsar's estimate from the ledgers: every entry after the mark-delete position, the individually
		// acknowledged ones included; the topic's is that of its slowest subscription.
		for id := max(s.markDelete+1, t.first); id < t.next; id++ {
			ss.BacklogSize += int64(len(t.entry(id).raw))
		}
		topicBacklog = max(topicBacklog, ss.BacklogSize)
		if s.active != nil {
			ss.ActiveConsumerName = s.active.name
		}
		if ss.Consumers == nil {
			ss.Consumers = []consumerStatsJSON{}
			ss.SubscriptionProps, ss.ConsumersAfterMarkDP = map[string]string{}, map[string]string{}
		}
		for _, k := range s.consumers {
			var unacked int64
			for _, pe := range k.pending {
				unacked += int64(pe.msgs)
			}
			ss.UnackedMessages += unacked
			ss.Consumers = append(ss.Consumers, consumerStatsJSON{
				ConsumerName: k.name, AvailablePermits: k.permits, UnackedMessages: unacked,
				Address: k.c.nc.RemoteAddr().String(), ConnectedSince: k.c.since.Format(adminTime),
				ClientVersion: k.c.clientVersion, Metadata: nonNilMap(k.metadata),
			})
		}
		st.Subscriptions[name] = ss
	}
	st.BacklogSize += topicBacklog
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func (a *adminServer) topicStats(w http.ResponseWriter, r *http.Request) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	if a.b.partitions(fq) > 0 {
		writeReason(w, http.StatusNotFound, topicNotFound(fq)) // Pulsar: use partitioned-stats
		return
	}
	t, err := a.b.getTopic(fq, false)
	if err != nil {
		writeReason(w, http.StatusNotFound, topicNotFound(fq))
		return
	}
	st := newTopicStatsJSON()
	t.adminStats(&st)
	writeJSON(w, http.StatusOK, st)
}

func (a *adminServer) partitionedStats(w http.ResponseWriter, r *http.Request) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	n := a.b.partitions(fq)
	if n == 0 {
		writeReason(w, http.StatusNotFound, "Partitioned Topic "+fq+" not found")
		return
	}
	st := newTopicStatsJSON()
	st.Metadata = &struct {
		Partitions int `json:"partitions"`
	}{n}
	perPartition := r.URL.Query().Get("perPartition") != "false"
	if perPartition {
		st.Partitions = map[string]topicStatsJSON{}
	}
	for _, t := range a.b.topicsFor(fq) {
		one := newTopicStatsJSON()
		t.adminStats(&one)
		if perPartition {
			st.Partitions[t.name] = one
		}
		mergeStats(&st, one)
	}
	writeJSON(w, http.StatusOK, st)
}

func mergeStats(into *topicStatsJSON, one topicStatsJSON) {
	into.MsgInCounter += one.MsgInCounter
	into.BytesInCounter += one.BytesInCounter
	into.StorageSize += one.StorageSize
	into.BacklogSize += one.BacklogSize
	into.Publishers = append(into.Publishers, one.Publishers...)
	for name, s := range one.Subscriptions {
		acc, ok := into.Subscriptions[name]
		if !ok {
			into.Subscriptions[name] = s
			continue
		}
		acc.MsgBacklog += s.MsgBacklog
		acc.MsgBacklogNoDelayed += s.MsgBacklogNoDelayed
		acc.MsgDelayed += s.MsgDelayed
		acc.UnackedMessages += s.UnackedMessages
		acc.BacklogSize += s.BacklogSize
		acc.Consumers = append(acc.Consumers, s.Consumers...)
		into.Subscriptions[name] = acc
	}
}

// kvMap turns wire key-value pairs into a map.
func kvMap(kvs []*wire.KeyValue) map[string]string {
	if len(kvs) == 0 {
		return nil
	}
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}
