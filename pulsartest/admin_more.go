package pulsartest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// Admin endpoints beyond topics and partitioned topics: namespaces, stats, message by id, lookup, schemas,
// unload and partition updates, with Apache Pulsar's status codes and JSON shapes.

// namespaceSet is the admin subset's record of namespaces. Namespaces exist implicitly for the binary
// protocol (a producer creates its topic in any namespace); the REST API answers create, delete and list as
// Pulsar does: public/default exists from the start, a namespace that holds topics exists, creating an
// existing one is 409 and deleting a missing one 404.
type namespaceSet struct {
	mu      sync.Mutex
	created map[string]bool
}

var builtinNamespaces = []string{"public/default", "public/functions", "pulsar/system"}

func (a *adminServer) registerMore(mux *http.ServeMux, base string) {
	a.ns.created = map[string]bool{}
	for _, n := range builtinNamespaces {
		a.ns.created[n] = true
	}
	mux.HandleFunc("POST "+base+"/{topic}/partitions", a.updatePartitions)
	mux.HandleFunc("GET "+base+"/{topic}/stats", a.topicStats)
	mux.HandleFunc("GET "+base+"/{topic}/partitioned-stats", a.partitionedStats)
	mux.HandleFunc("GET "+base+"/{topic}/ledger/{ledger}/entry/{entry}", a.messageByID)
	mux.HandleFunc("PUT "+base+"/{topic}/unload", a.unload)
	mux.HandleFunc("POST "+base+"/{topic}/trim", a.trim)
	const nsBase = "/admin/v2/namespaces/{tenant}/{namespace}"
	mux.HandleFunc("PUT "+nsBase, a.createNamespace)
	mux.HandleFunc("DELETE "+nsBase, a.deleteNamespace)
	mux.HandleFunc("GET "+nsBase+"/topics", a.namespaceTopics)
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}", a.listNamespaces)
	for _, p := range []string{"/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", "/lookup/v2/destination/{domain}/{tenant}/{namespace}/{topic}"} {
		mux.HandleFunc("GET "+p, a.lookup)
	}
	const schema = "/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema"
	mux.HandleFunc("GET "+schema, a.getSchema)
	mux.HandleFunc("GET "+schema+"/{version}", a.getSchema)
	mux.HandleFunc("DELETE "+schema, a.deleteSchema)
	a.registerQuota(mux) // backlog_quota.go
}

func nsOf(r *http.Request) string { return r.PathValue("tenant") + "/" + r.PathValue("namespace") }

// nsExists reports whether the namespace was created (or is built in) or holds topics.
func (a *adminServer) nsExists(ns string) bool {
	a.ns.mu.Lock()
	ok := a.ns.created[ns]
	a.ns.mu.Unlock()
	return ok || len(a.b.topicsOfNamespace(ns)) > 0 || len(a.partitionedOf(ns)) > 0
}

func (a *adminServer) partitionedOf(ns string) []string {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	var out []string
	for name := range a.b.partitioned {
		if namespaceOf(name) == ns {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (a *adminServer) createNamespace(w http.ResponseWriter, r *http.Request) {
	ns := nsOf(r)
	if a.nsExists(ns) {
		writeReason(w, http.StatusConflict, "Namespace already exists")
		return
	}
	a.ns.mu.Lock()
	a.ns.created[ns] = true
	a.ns.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (a *adminServer) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	ns := nsOf(r)
	if !a.nsExists(ns) {
		writeReason(w, http.StatusNotFound, "Namespace does not exist")
		return
	}
	force := r.URL.Query().Get("force") == "true"
	topics := a.b.topicsOfNamespace(ns)
	if len(topics) > 0 || len(a.partitionedOf(ns)) > 0 {
		if !force {
			writeReason(w, http.StatusConflict, "Cannot delete non empty namespace")
			return
		}
		for _, name := range append(a.partitionedOf(ns), topics...) {
			if err := a.b.DeleteTopic(name); err != nil && !errors.Is(err, ErrTopicNotFound) {
				writeErr(w, err)
				return
			}
		}
	}
	a.ns.mu.Lock()
	delete(a.ns.created, ns)
	a.ns.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (a *adminServer) listNamespaces(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant") + "/"
	set := map[string]bool{}
	a.ns.mu.Lock()
	for n := range a.ns.created {
		set[n] = true
	}
	a.ns.mu.Unlock()
	for _, t := range a.b.Topics() {
		set[namespaceOf(t)] = true
	}
	var out []string
	for n := range set {
		if strings.HasPrefix(n, tenant) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	writeJSON(w, http.StatusOK, nonNil(out))
}

// namespaceTopics lists the namespace's topics (partitions, not partitioned names), like Pulsar's
// GET /admin/v2/namespaces/{tenant}/{namespace}/topics; mode=NON_PERSISTENT lists none.
func (a *adminServer) namespaceTopics(w http.ResponseWriter, r *http.Request) {
	ns := nsOf(r)
	if !a.nsExists(ns) {
		writeReason(w, http.StatusNotFound, "Namespace does not exist")
		return
	}
	topics := a.b.topicsOfNamespace(ns)
	mode := strings.ToUpper(r.URL.Query().Get("mode"))
	var out []string
	for _, t := range topics {
		persistent := strings.HasPrefix(t, "persistent://")
		if mode == "ALL" || (mode == "NON_PERSISTENT" && !persistent) || (mode != "NON_PERSISTENT" && persistent) {
			out = append(out, t)
		}
	}
	writeJSON(w, http.StatusOK, nonNil(out))
}

// partitionsBody parses a partition count: a bare JSON number (POST …/partitions, older clients) or the
// partitioned-topic metadata object {"partitions":N,"properties":{…}} that pulsaradmin sends.
func partitionsBody(r *http.Request) (int, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64*1024))
	if err != nil {
		return 0, fmt.Errorf("pulsartest: read body: %w", err)
	}
	s := strings.TrimSpace(string(body))
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	var meta struct {
		Partitions *int `json:"partitions"`
	}
	if err := json.Unmarshal(body, &meta); err != nil || meta.Partitions == nil {
		return 0, fmt.Errorf("%w: partition count %q: want a number or {\"partitions\":N}", ErrInvalidTopic, s)
	}
	return *meta.Partitions, nil
}

// updatePartitions increases the partition count of a partitioned topic (POST …/partitions).
func (a *adminServer) updatePartitions(w http.ResponseWriter, r *http.Request) {
	n, err := partitionsBody(r)
	if err != nil {
		writeReason(w, http.StatusBadRequest, err.Error())
		return
	}
	err = a.b.UpdatePartitionedTopic(topicOf(r), n)
	switch {
	case errors.Is(err, ErrTopicNotFound):
		writeReason(w, http.StatusNotFound, "Partitioned topic does not exist")
	case errors.Is(err, ErrInvalidTopic):
		writeReason(w, http.StatusUnprocessableEntity, err.Error())
	default:
		writeErr(w, err)
	}
}

// UpdatePartitionedTopic raises the partition count of a partitioned topic to n, creating the new
// partitions; clients find them through their partition-metadata polling. A smaller n fails with
// ErrInvalidTopic, as Pulsar refuses to shrink a partitioned topic.
func (b *Broker) UpdatePartitionedTopic(name string, n int) error {
	fq, err := normalizeTopic(name)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	have, ok := b.partitioned[fq]
	switch {
	case !ok:
		return fmt.Errorf("%w: partitioned topic %s", ErrTopicNotFound, fq)
	case n < have:
		return fmt.Errorf("%w: expect partitions %d greater than current partitions %d", ErrInvalidTopic, n, have)
	}
	b.partitioned[fq] = n
	for i := have; i < n; i++ {
		p := fq + partitionSuffix + strconv.Itoa(i)
		if _, ok := b.topics[p]; !ok {
			b.createTopicLocked(p)
		}
	}
	return nil
}

// existingTopic returns the request's topic, or answers the request itself (400 for a bad
// name, 404 "Topic … not found" as Pulsar does) and returns false.
func (a *adminServer) existingTopic(w http.ResponseWriter, r *http.Request) (string, bool) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		writeErr(w, err)
		return "", false
	}
	if len(a.b.topicsFor(fq)) == 0 {
		writeReason(w, http.StatusNotFound, "Topic "+fq+" not found")
		return "", false
	}
	return fq, true
}

func (a *adminServer) unload(w http.ResponseWriter, r *http.Request) {
	fq, ok := a.existingTopic(w, r)
	if !ok {
		return
	}
	a.b.UnloadTopic(fq)
	w.WriteHeader(http.StatusNoContent)
}

// trim answers Pulsar's POST …/trim (trimTopic): it deletes what no durable subscription needs and the retention
// policy does not keep, of the topic or of every partition of a partitioned one (Broker.Trim). As Pulsar 4.0
// does, it answers 200 with an empty body (not 204), and 404 for a topic that does not exist.
func (a *adminServer) trim(w http.ResponseWriter, r *http.Request) {
	fq, ok := a.existingTopic(w, r)
	if !ok {
		return
	}
	a.b.Trim(fq)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// lookup answers Pulsar's HTTP lookup: this broker owns every topic.
func (a *adminServer) lookup(w http.ResponseWriter, r *http.Request) {
	if d := r.PathValue("domain"); d != "persistent" && d != "non-persistent" {
		writeReason(w, http.StatusPreconditionFailed, "pulsartest: invalid topic domain "+d)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"brokerUrl": a.b.url, "brokerUrlTls": a.b.tlsURL(), "httpUrl": a.url, "httpUrlTls": a.tlsURL(),
		"nativeUrl": a.b.url,
	})
}

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
	md, err := wire.ParsePayload(raw)
	if err != nil {
		writeReason(w, http.StatusInternalServerError, err.Error())
		return
	}
	if md.GetCompression() != wire.CompressionType_NONE {
		writeReason(w, http.StatusNotImplemented, "pulsartest: reading a compressed entry is not supported")
		return
	}
	metaSize := int(binary.BigEndian.Uint32(raw[6:]))
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Pulsar-Message-ID", fmt.Sprintf("%d:%d", ledger, eid))
	if md.PublishTime != nil {
		h.Set("X-Pulsar-publish-time", time.UnixMilli(int64(md.GetPublishTime())).UTC().Format(adminTime)) //nolint:gosec // ms
	}
	if md.NumMessagesInBatch != nil {
		h.Set("X-Pulsar-num-batch-message", strconv.Itoa(int(md.GetNumMessagesInBatch())))
	}
	for _, kv := range md.GetProperties() {
		h.Set("X-Pulsar-PROPERTY-"+kv.GetKey(), kv.GetValue())
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(raw[10+metaSize:]) // the client went away: nothing else to tell it
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
	for name, s := range t.subs {
		ss := st.Subscriptions[name]
		ss.Type, ss.IsDurable, ss.AllowOutOfOrder = s.subType.String(), s.durable, s.allowOOO
		backlog := int64(s.backlog())
		ss.MsgBacklog += backlog
		ss.MsgDelayed += int64(len(s.delayed))
		ss.MsgBacklogNoDelayed += backlog - int64(len(s.delayed))
		for id := max(s.markDelete+1, t.first); id < t.next; id++ {
			if _, ok := s.acked[id]; !ok {
				ss.BacklogSize += int64(len(t.entry(id).raw))
			}
		}
		st.BacklogSize += ss.BacklogSize
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
