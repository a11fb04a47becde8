package pulsartest

import (
	"encoding/base64"
	"fmt"
	"math"
	"math/bits"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// entry is the bytes of one SEND (a message, a batch or a chunk), stored from the 0x0e01 magic on.
type entry struct {
	id          int64
	raw         []byte
	numMsgs     int32
	hasBatch    bool  // num_messages_in_batch present: GET_LAST_MESSAGE_ID reports a batch index
	dueAt       int64 // the first broker millisecond at which Shared and Key_Shared may dispatch it; see newEntry
	hash        uint32
	publishTime int64
	brokerTime  int64
	index       int64 // broker entry index: index of the entry's last message in the topic
	uuid        string
	lastChunk   bool
	txn         *txnID // the transaction its metadata names (txnid_*), by which an abort hides it
}

const noneKey = "NONE_KEY"

// dueAt is the first broker millisecond (Unix) at which an entry with the given deliver_at_time may
// be dispatched, or 0 when it is not delayed. deliver_at_time counts whole milliseconds, and a client
// truncates the instant it was asked for (pulsar-client-go does), so that instant may lie anywhere in
// the millisecond: dispatching in it could deliver a message up to 1 ms before the time its producer
// asked for. The entry is due when the whole millisecond has passed, never early and at most 1 ms late.
func dueAt(deliverAt int64) int64 {
	if deliverAt <= 0 {
		return 0
	}
	return deliverAt + 1
}

func newEntry(raw []byte, md *wire.MessageMetadata, now int64) *entry {
	e := &entry{
		raw:         raw,
		numMsgs:     max(md.GetNumMessagesInBatch(), 1),
		hasBatch:    md.NumMessagesInBatch != nil,
		dueAt:       dueAt(md.GetDeliverAtTime()),
		publishTime: int64(md.GetPublishTime()), //nolint:gosec // ms timestamps
		brokerTime:  now,
		uuid:        md.GetUuid(),
	}
	if md.TxnidMostBits != nil && md.TxnidLeastBits != nil {
		e.txn = &txnID{most: md.GetTxnidMostBits(), least: md.GetTxnidLeastBits()}
	}
	if e.uuid != "" {
		e.lastChunk = md.GetChunkId() >= md.GetNumChunksFromMsg()-1
	}
	key := []byte(noneKey)
	switch {
	case len(md.GetOrderingKey()) > 0:
		key = md.GetOrderingKey()
	case md.GetPartitionKey() != "":
		key = []byte(md.GetPartitionKey())
		if md.GetPartitionKeyB64Encoded() {
			if dec, err := base64.StdEncoding.DecodeString(md.GetPartitionKey()); err == nil {
				key = dec
			}
		}
	}
	e.hash = murmur3(key)
	return e
}

// topic is one non-partitioned topic or one partition. mu guards everything below it.
type topic struct {
	b         *Broker
	name      string
	base      string // partitioned topic name for a partition, else name
	partition int32
	ledgerID  uint64
	// nonPersistent: a non-persistent:// topic, which stores nothing (nonpersistent.go)
	nonPersistent bool

	injectedSendErrors atomic.Int64
	terminated         atomic.Bool // terminate.go

	mu        sync.Mutex
	entries   []*entry
	first     int64 // id of entries[0]
	next      int64 // id of the next entry
	msgCount  int64
	size      int64 // bytes of entries (retention.go)
	lastBatch int32 // batch index of the last message written, -1 without a batch (outlives a trim)
	subs      map[string]*subscription
	producers map[*producer]struct{}
	access    producerAccess // exclusive-producer state (access.go)

	openTxns    map[txnID]int64    // txn.go: first entry of each open transaction sent to the topic
	abortedTxns map[txnID]struct{} // txn.go: transactions aborted on the topic
}

func newTopic(b *Broker, name, base string, partition int32, ledger uint64) *topic {
	return &topic{
		b: b, name: name, base: base, partition: partition, ledgerID: ledger, nonPersistent: isNonPersistent(name),
		subs: map[string]*subscription{}, producers: map[*producer]struct{}{},
		openTxns: map[txnID]int64{}, abortedTxns: map[txnID]struct{}{},
	}
}

func (t *topic) entry(id int64) *entry {
	if id < t.first || id >= t.next {
		return nil
	}
	return t.entries[id-t.first]
}

func (t *topic) now() int64 { return t.b.opts.clock.Now().UnixMilli() }

// kick runs one dispatch pass and sends what it produced after unlocking.
func (t *topic) kick() {
	t.mu.Lock()
	outs := t.dispatchLocked(nil)
	t.mu.Unlock()
	send(outs)
}

func (t *topic) dispatchLocked(outs []outbound) []outbound {
	if t.b.isPaused(t) {
		return outs
	}
	now := t.now()
	for _, s := range t.subs {
		outs = s.dispatch(now, outs)
	}
	return outs
}

// append stores e and returns its entry id, or false when the topic is terminated: terminate
// sets the flag under the same lock, so nothing is stored after the id that it reports.
func (t *topic) append(e *entry, txn *txnID) (int64, []outbound, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.terminated.Load() {
		return 0, nil, false
	}
	e.id = t.next
	if txn != nil {
		t.joinTxnLocked(*txn, e)
	}
	t.next++
	t.msgCount += int64(e.numMsgs)
	e.index = t.msgCount - 1
	t.entries = append(t.entries, e)
	t.size += int64(len(e.raw))
	t.lastBatch = -1
	if e.hasBatch {
		t.lastBatch = e.numMsgs - 1
	}
	outs := t.dispatchLocked(nil)
	if t.nonPersistent {
		t.dropUndeliveredLocked()
	}
	return e.id, outs, true
}

// usage is the number of connected producers and consumers, Pulsar's usage count; a topic with any is busy.
func (t *topic) usage() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(t.producers)
	for _, s := range t.subs {
		n += len(s.consumers)
	}
	return n
}

func (t *topic) inactive() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.producers) == 0 && len(t.subs) == 0
}

func (t *topic) stopTimers() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, s := range t.subs {
		s.stopTimer()
	}
}

func (t *topic) subscribe(c *conn, m *wire.CommandSubscribe) (*consumer, ServerError, string) {
	t.mu.Lock()
	var outs []outbound
	defer func() {
		t.mu.Unlock()
		send(outs)
	}()
	name, typ := m.GetSubscription(), m.GetSubType()
	ks := m.GetKeySharedMeta()
	if m.GetReadCompacted() && !t.nonPersistent && typ != wire.CommandSubscribe_Exclusive && typ != wire.CommandSubscribe_Failover {
		return nil, NotAllowedError, "readCompacted only allowed on failover or exclusive subscriptions" // as Pulsar's PersistentTopic
	}
	s := t.subs[name]
	if s != nil {
		for _, o := range append([]*consumer(nil), s.consumers...) {
			if o.c.isClosed() { // a dropped connection whose teardown has not run yet
				outs = t.removeConsumerLocked(o, false, outs)
			}
		}
		if t.subs[name] == nil {
			s = nil // a non-durable subscription went with its last consumer
		}
	}
	switch {
	case s == nil:
		s = t.newSubscription(name, m.GetDurable() && !t.nonPersistent, typ, ks)
		pos := t.next
		switch {
		case t.nonPersistent: // nothing stored to start from (nonpersistent.go)
		case !m.GetDurable():
			pos = t.startPosition(m.GetStartMessageId())
		case m.GetInitialPosition() == wire.CommandSubscribe_Earliest:
			pos = t.first
		}
		s.setPosition(pos)
		t.subs[name] = s
	case len(s.consumers) > 0:
		switch {
		case s.subType == wire.CommandSubscribe_Exclusive && typ == wire.CommandSubscribe_Exclusive:
			return nil, ConsumerBusy, "Exclusive consumer is already connected"
		case s.subType != typ:
			return nil, ConsumerBusy, "Subscription is of different type. Active subscription type of '" +
				s.subType.String() + "' is different than the connecting consumer's type '" + typ.String() + "'."
		case typ == wire.CommandSubscribe_Key_Shared && s.ksMode != ks.GetKeySharedMode():
			return nil, ConsumerBusy, "Subscription is of different type. Active subscription key_shared mode of '" +
				s.ksMode.String() + "' is different than the connecting consumer's key_shared mode '" +
				ks.GetKeySharedMode().String() + "'."
		case typ == wire.CommandSubscribe_Key_Shared && s.allowOOO && !ks.GetAllowOutOfOrderDelivery():
			return nil, ConsumerBusy, "Subscription is of different type. Active subscription allows out of order " +
				"delivery while the connecting consumer does not allow it."
		case typ == wire.CommandSubscribe_Key_Shared && !s.allowOOO && ks.GetAllowOutOfOrderDelivery():
			return nil, ConsumerBusy, "Subscription is of different type. Active subscription does not allow out of " +
				"order delivery while the connecting consumer allows it."
		}
	default:
		s.subType, s.ksMode, s.allowOOO = typ, ks.GetKeySharedMode(), ks.GetAllowOutOfOrderDelivery()
	}
	k := &consumer{
		id: m.GetConsumerId(), c: c, name: m.GetConsumerName(), sub: s, priority: m.GetPriorityLevel(),
		pending: map[int64]pendingEntry{},
	}
	if s.subType == wire.CommandSubscribe_Key_Shared && s.ksMode == wire.KeySharedMode_STICKY {
		ranges, msg := stickyRanges(s, ks.GetHashRanges())
		if msg != "" {
			return nil, ConsumerAssignError, msg
		}
		k.ranges = ranges
	}
	if s.autoSplit() && !s.splitAdd(k) {
		return nil, ConsumerAssignError, "no hash range left to split for a new consumer"
	}
	s.addConsumer(k)
	s.membershipChanged()
	if s.singleActive() {
		outs = s.pickActive(outs)
	}
	return k, 0, ""
}

// stickyRanges validates a STICKY Key_Shared consumer's hash ranges in Pulsar's order and with its texts: at
// least one range, none with start > end, none overlapping another of its own or one of another consumer. As
// in Pulsar, a range may reach outside 0..65535; only the part inside ever matches a key.
func stickyRanges(s *subscription, in []*wire.IntRange) ([]hashRange, string) {
	if len(in) == 0 {
		return nil, "Ranges for KeyShared policy must not be empty."
	}
	ranges := make([]hashRange, 0, len(in))
	for _, r := range in {
		if r.GetStart() > r.GetEnd() {
			return nil, fmt.Sprintf("Fixed hash range start > end for range: [%d,%d]", r.GetStart(), r.GetEnd())
		}
		ranges = append(ranges, hashRange{start: r.GetStart(), end: r.GetEnd()})
	}
	for i, a := range ranges {
		for _, b := range ranges[i+1:] {
			if a.start <= b.end && b.start <= a.end {
				return nil, fmt.Sprintf("Consumer's own ranges conflict: [%d,%d] overlaps with [%d,%d]", a.start, a.end, b.start, b.end)
			}
		}
	}
	for _, r := range ranges {
		for _, other := range s.consumers {
			for _, o := range other.ranges {
				if r.start <= o.end && o.start <= r.end {
					return nil, "Range conflict with consumer " + other.describe()
				}
			}
		}
	}
	return ranges, ""
}

// describe renders the consumer as Pulsar's Consumer.toString does, for error texts that name it.
func (k *consumer) describe() string {
	local, remote := k.c.nc.LocalAddr().String(), k.c.nc.RemoteAddr().String()
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		host = remote
	}
	kind := "PersistentSubscription"
	if k.sub.t.nonPersistent {
		kind = "NonPersistentSubscription"
	}
	return fmt.Sprintf("Consumer{subscription=%s{topic=%s, name=%s}, consumerId=%d, consumerName=%s, "+
		"address=[id: 0x%08x, L:/%s - R:/%s] [SR:%s, state:Connected]}",
		kind, k.sub.t.name, k.sub.name, k.id, k.name, uint32(k.c.id), local, remote, host) //nolint:gosec // a display id
}

// startPosition resolves a non-durable start message id to the first entry to read. A concrete id is delivered
// itself (the client filters it), like a real broker stepping one entry back.
func (t *topic) startPosition(id *wire.MessageIdData) int64 {
	if id == nil {
		return t.next
	}
	l, e := id.GetLedgerId(), id.GetEntryId()
	switch {
	case l == math.MaxUint64 || e == math.MaxUint64:
		return t.first
	case l >= math.MaxInt64 || e >= math.MaxInt64:
		return t.next
	}
	return min(max(int64(e), t.first), t.next)
}

func (t *topic) flow(k *consumer, n int64) {
	t.mu.Lock()
	k.permits += n
	first := !k.flowSeen
	k.flowSeen = true
	var outs []outbound
	if first && k.sub.subType == wire.CommandSubscribe_Failover {
		outs = k.sub.notifyActive(outs)
	}
	outs = t.dispatchLocked(outs)
	t.mu.Unlock()
	send(outs)
}

func (t *topic) ack(k *consumer, m *wire.CommandAck) {
	t.mu.Lock()
	s := k.sub
	if k.removed {
		t.mu.Unlock()
		return
	}
	ids := m.GetMessageId()
	if m.GetAckType() == wire.CommandAck_Cumulative {
		if !s.singleActive() || len(ids) == 0 {
			t.b.log.Warn("pulsartest: cumulative ack ignored on " + s.subType.String() + " subscription")
		} else {
			id := ids[0]
			eid := int64(id.GetEntryId()) //nolint:gosec // entry ids are small
			if t.b.opts.batchIndexAck && anyBit(id.GetAckSet()) {
				s.ackUpTo(eid - 1)
				s.partialAck(eid, id.GetAckSet())
			} else {
				s.ackUpTo(eid)
			}
		}
	} else {
		for _, id := range ids {
			if id.GetLedgerId() != t.ledgerID {
				continue
			}
			eid := int64(id.GetEntryId()) //nolint:gosec // entry ids are small
			if t.b.opts.batchIndexAck && len(id.GetAckSet()) > 0 && anyBit(id.GetAckSet()) {
				s.partialAck(eid, id.GetAckSet())
				continue
			}
			s.fullAck(eid)
		}
	}
	outs := t.dispatchLocked(nil)
	t.mu.Unlock()
	send(outs)
}

func (t *topic) redeliver(k *consumer, ids []*wire.MessageIdData) {
	t.mu.Lock()
	s := k.sub
	if !k.removed {
		if s.singleActive() {
			// Ids are ignored: a single active consumer gets everything after mark-delete again, in order.
			if k == s.active {
				s.readPos = s.markDelete + 1
			}
		} else {
			var which []int64
			if len(ids) == 0 {
				for id := range k.pending {
					which = append(which, id)
				}
			} else {
				for _, id := range ids {
					which = append(which, int64(id.GetEntryId())) //nolint:gosec // small
				}
			}
			for _, id := range which {
				if _, ok := k.pending[id]; ok {
					s.unpend(k, id)
					s.redelivery[id]++
					s.addReplay(id)
				}
			}
		}
	}
	outs := t.dispatchLocked(nil)
	t.mu.Unlock()
	send(outs)
}

// removeConsumer detaches k. With notify, the client is told by CLOSE_CONSUMER (broker-initiated close).
func (t *topic) removeConsumer(k *consumer, notify bool) {
	t.mu.Lock()
	outs := t.removeConsumerLocked(k, notify, nil)
	outs = t.dispatchLocked(outs)
	t.mu.Unlock()
	send(outs)
}

func (t *topic) removeConsumerLocked(k *consumer, notify bool, outs []outbound) []outbound {
	if k.removed {
		return outs
	}
	k.removed = true
	s := k.sub
	for i, o := range s.consumers {
		if o == k {
			s.consumers = append(s.consumers[:i:i], s.consumers[i+1:]...)
			switch {
			case i < s.rrIdx:
				s.rrIdx-- // the current consumer keeps its turn
			case i == s.rrIdx:
				s.rrGiven = 0 // the consumer after it starts a fresh turn
			}
			break
		}
	}
	s.splitRemove(k)
	if notify {
		k.c.mu.Lock()
		if k.c.consumers[k.id] == k {
			delete(k.c.consumers, k.id)
		}
		k.c.mu.Unlock()
		outs = append(outs, outbound{k.c, k.c.encode(&wire.BaseCommand{
			Type:          cmdType(wire.BaseCommand_CLOSE_CONSUMER),
			CloseConsumer: &wire.CommandCloseConsumer{ConsumerId: ptr(k.id), RequestId: ptr(uint64(0))},
		})})
	}
	s.membershipChanged()
	if s.singleActive() {
		outs = s.pickActive(outs)
	} else {
		for id := range k.pending {
			s.unpend(k, id)
			if t.b.opts.redeliveryOnDisconnect && len(s.consumers) > 0 {
				s.redelivery[id]++
			}
			s.addReplay(id)
		}
		if len(s.consumers) == 0 {
			s.resetDispatch()
		}
	}
	// A non-durable subscription (a reader's) goes with its last consumer, whatever its type, as on a real
	// broker; seek keeps it while it detaches the consumers.
	if len(s.consumers) == 0 && !s.durable && !s.keep {
		s.stopTimer()
		delete(t.subs, s.name)
	}
	return outs
}

func (t *topic) unsubscribe(k *consumer, force bool) (ServerError, string) {
	t.mu.Lock()
	s := k.sub
	if len(s.consumers) > 1 && !force {
		t.mu.Unlock()
		return MetadataError, "Unconnected or shared consumer attempting to unsubscribe"
	}
	var outs []outbound
	for _, o := range append([]*consumer(nil), s.consumers...) {
		outs = t.removeConsumerLocked(o, o != k, outs)
	}
	s.stopTimer()
	delete(t.subs, s.name)
	t.mu.Unlock()
	send(outs)
	return 0, ""
}

func (t *topic) seek(s *subscription, m *wire.CommandSeek) {
	t.mu.Lock()
	pos := t.first
	if id := m.GetMessageId(); id != nil {
		pos = t.startPosition(id)
	} else {
		ts := int64(m.GetMessagePublishTime()) //nolint:gosec // ms timestamp
		for i := len(t.entries) - 1; i >= 0; i-- {
			e := t.entries[i]
			when := e.publishTime
			if t.b.opts.brokerEntryMetadata {
				when = e.brokerTime
			}
			if when <= ts {
				pos = e.id + 1
				break
			}
		}
	}
	var outs []outbound
	s.keep = true
	for _, k := range append([]*consumer(nil), s.consumers...) {
		outs = t.removeConsumerLocked(k, true, outs)
	}
	s.keep = false
	s.resetDispatch()
	s.setPosition(pos)
	t.mu.Unlock()
	send(outs)
}

func (t *topic) lastMessageID(s *subscription) (*wire.MessageIdData, *wire.MessageIdData) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last *wire.MessageIdData
	switch {
	case t.first >= t.next && !t.nonPersistent:
		// Nothing is stored: the topic was never written to, or a trim removed everything. Pulsar 4.0 answers
		// -1:-1 for both (the last entry went with its ledger), so a reader from Earliest has no next message.
		last = &wire.MessageIdData{
			LedgerId: ptr(uint64(math.MaxUint64)), EntryId: ptr(uint64(math.MaxUint64)), Partition: ptr(t.partition),
			BatchIndex: ptr(int32(-1)),
		}
	default: // the last entry written, although a trim may have removed it from a non-persistent topic
		last = &wire.MessageIdData{LedgerId: ptr(t.ledgerID), EntryId: ptr(uint64(math.MaxUint64)), Partition: ptr(t.partition)}
		if lim := t.readLimit(); lim < t.next {
			// An open transaction holds entries back: the last readable one (Pulsar's maxReadPosition).
			last.EntryId = ptr(uint64(lim - 1)) //nolint:gosec // -1 wraps as on the wire
			if e := t.entry(lim - 1); e != nil && e.hasBatch {
				last.BatchIndex = ptr(e.numMsgs - 1)
			}
		} else if t.next > 0 {
			last.EntryId = ptr(uint64(t.next - 1))
			if t.lastBatch >= 0 {
				last.BatchIndex = ptr(t.lastBatch)
			}
		}
	}
	md := &wire.MessageIdData{LedgerId: ptr(t.ledgerID), EntryId: ptr(uint64(s.markDelete))} //nolint:gosec // -1 wraps as on the wire
	return last, md
}

func (t *topic) unload() {
	t.mu.Lock()
	var outs []outbound
	for p := range t.producers {
		outs = append(outs, p.c.closeProducer(p))
	}
	t.producers = map[*producer]struct{}{}
	outs = t.unloadAccessLocked(outs)
	for _, s := range t.subs {
		for _, k := range append([]*consumer(nil), s.consumers...) {
			outs = t.removeConsumerLocked(k, true, outs)
		}
	}
	t.mu.Unlock()
	send(outs)
}

// strand forgets the consumers of the subscription as an unload does, but sends nothing to their
// clients (Broker.StrandConsumers).
func (t *topic) strand(subscription string) int {
	t.mu.Lock()
	s := t.subs[subscription]
	if s == nil {
		t.mu.Unlock()
		return 0
	}
	stranded := append([]*consumer(nil), s.consumers...)
	var outs []outbound
	for _, k := range stranded {
		k.c.mu.Lock()
		if k.c.consumers[k.id] == k {
			delete(k.c.consumers, k.id)
		}
		k.c.mu.Unlock()
		outs = t.removeConsumerLocked(k, false, outs)
	}
	outs = t.dispatchLocked(outs)
	t.mu.Unlock()
	send(outs)
	return len(stranded)
}

func (t *topic) subscriptionNames() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.subs))
	for n := range t.subs {
		out = append(out, n)
	}
	return out
}

func (t *topic) backlog(sub string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.subs[sub]
	if s == nil {
		return 0
	}
	return s.backlog()
}

func (t *topic) addStats(st *TopicStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st.Entries += len(t.entries)
	st.StorageSize += int(t.size)
	for _, e := range t.entries {
		st.Messages += int(e.numMsgs)
	}
	st.Producers += len(t.producers)
	st.InjectedSendErrors += int(t.injectedSendErrors.Load())
	for name, s := range t.subs {
		ss := st.Subscriptions[name]
		ss.Type, ss.Durable = s.subType.String(), s.durable
		ss.Consumers += len(s.consumers)
		ss.Backlog += s.backlog()
		ss.Replay += len(s.replay)
		ss.Delayed += len(s.delayed)
		for _, k := range s.consumers {
			ss.Pending += len(k.pending)
			ss.Permits += int(k.permits)
		}
		st.Subscriptions[name] = ss
	}
}

func anyBit(set []int64) bool {
	for _, w := range set {
		if w != 0 {
			return true
		}
	}
	return false
}

func popcount(set []int64) int32 {
	var n int32
	for _, w := range set {
		n += int32(bits.OnesCount64(uint64(w))) //nolint:gosec // at most 64
	}
	return n
}

func durationMs(ms int64) time.Duration { return time.Duration(ms) * time.Millisecond }

func sortedIDs(m map[int64]struct{}) []int64 {
	out := make([]int64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
