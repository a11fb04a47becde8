package pulsartest

import (
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

const (
	maxRoundRobinBatch = 20    // dispatcherMaxRoundRobinBatchSize
	ringPointsPerKey   = 100   // consistent-hash points per Key_Shared consumer
	ksRangeSize        = 65536 // hash range of sticky Key_Shared consumers
)

// consumer is one SUBSCRIBE on a connection. Guarded by its topic's lock, except id, c, name and sub.
type consumer struct {
	id   uint64
	c    *conn
	name string
	sub  *subscription

	priority int32 // CommandSubscribe.priority_level: 0 is the highest
	permits  int64
	flowSeen bool
	removed  bool
	active   int8 // last ACTIVE_CONSUMER_CHANGE sent: 0 none, 1 active, 2 inactive
	pending  map[int64]pendingEntry
	ranges   []hashRange
	metadata map[string]string // CommandSubscribe.metadata, for the admin stats (under the topic lock)
}

type pendingEntry struct {
	msgs int32
	hash uint32
}

type hashRange struct{ start, end int32 }

type splitRange struct {
	end int32
	k   *consumer
}

func (k *consumer) ready() bool { return k.flowSeen && k.permits > 0 }

type ringPoint struct {
	hash uint32
	k    *consumer
}

type hashHold struct {
	k *consumer
	n int
}

// subscription is a cursor plus a dispatcher. Guarded by its topic's lock.
type subscription struct {
	t        *topic
	name     string
	durable  bool
	keep     bool // do not delete a non-durable subscription while seeking
	subType  wire.CommandSubscribe_SubType
	ksMode   wire.KeySharedMode
	allowOOO bool

	markDelete int64 // every entry <= markDelete is acknowledged
	acked      map[int64]struct{}
	batchAcks  map[int64][]int64 // batch-index ack sets (bit 1 = unacked) of partially acked entries
	readPos    int64

	consumers []*consumer
	active    *consumer // Exclusive and Failover

	// Shared and Key_Shared
	replay       map[int64]struct{}
	replayHashes map[uint32]int
	redelivery   map[int64]int
	delayed      map[int64]int64 // entry id → the millisecond it is due (entry.dueAt)
	timerStop    func() bool
	timerAt      int64
	failoverStop func() bool // realistic timing: pending start of a new active consumer
	holdActive   bool        // realistic timing: the new active consumer waits for the failover delay
	rrIdx        int
	rrGiven      int
	chunkOwner   map[string]*consumer
	ring         []ringPoint
	splits       []splitRange // AutoSplitHashRange: ranges by end, ascending
	holds        map[uint32]*hashHold

	txnAcks map[int64]txnID // txn.go: entries acknowledged inside an open transaction
}

func (t *topic) newSubscription(name string, durable bool, typ wire.CommandSubscribe_SubType, ks *wire.KeySharedMeta) *subscription {
	s := &subscription{
		t: t, name: name, durable: durable, subType: typ,
		ksMode: ks.GetKeySharedMode(), allowOOO: ks.GetAllowOutOfOrderDelivery(),
		acked: map[int64]struct{}{}, batchAcks: map[int64][]int64{}, txnAcks: map[int64]txnID{},
	}
	s.resetDispatch()
	return s
}

func (s *subscription) singleActive() bool {
	return s.subType == wire.CommandSubscribe_Exclusive || s.subType == wire.CommandSubscribe_Failover
}

// setPosition makes pos the next entry to read, with everything before it acknowledged.
func (s *subscription) setPosition(pos int64) {
	s.markDelete = pos - 1
	s.readPos = pos
	s.acked = map[int64]struct{}{}
	s.batchAcks = map[int64][]int64{}
}

func (s *subscription) resetDispatch() {
	s.stopTimer()
	s.replay = map[int64]struct{}{}
	s.replayHashes = map[uint32]int{}
	s.redelivery = map[int64]int{}
	s.delayed = map[int64]int64{}
	s.chunkOwner = map[string]*consumer{}
	s.holds = map[uint32]*hashHold{}
	s.rrIdx, s.rrGiven = 0, 0
	s.readPos = s.markDelete + 1
	for _, k := range s.consumers {
		k.pending = map[int64]pendingEntry{}
	}
}

// stopTimer stops the subscription's timers.
func (s *subscription) stopTimer() {
	s.stopDelayedTimer()
	if s.failoverStop != nil {
		s.failoverStop()
		s.failoverStop, s.holdActive = nil, false
	}
}

func (s *subscription) stopDelayedTimer() {
	if s.timerStop != nil {
		s.timerStop()
		s.timerStop, s.timerAt = nil, 0
	}
}

func (s *subscription) isAcked(id int64) bool {
	if id <= s.markDelete {
		return true
	}
	_, ok := s.acked[id]
	return ok
}

func (s *subscription) backlog() int {
	n := 0
	for id := max(s.markDelete+1, s.t.first); id < s.t.next; id++ {
		if _, ok := s.acked[id]; ok {
			continue
		}
		if set, ok := s.batchAcks[id]; ok {
			n += int(popcount(set))
			continue
		}
		n += int(s.t.entry(id).numMsgs)
	}
	return n
}

// backlogEntries is the subscription's backlog as Pulsar's admin stats count it (msgBacklog): the entries after
// the mark-delete position not acknowledged whole, a batch counting as one.
func (s *subscription) backlogEntries() int {
	n := 0
	for id := max(s.markDelete+1, s.t.first); id < s.t.next; id++ {
		if _, ok := s.acked[id]; !ok {
			n++
		}
	}
	return n
}

func (s *subscription) advanceMarkDelete() {
	for {
		if _, ok := s.acked[s.markDelete+1]; !ok {
			return
		}
		delete(s.acked, s.markDelete+1)
		s.markDelete++
	}
}

// forget drops an acknowledged entry from the dispatcher state.
func (s *subscription) forget(id int64) {
	for _, k := range s.consumers {
		if _, ok := k.pending[id]; ok {
			s.unpend(k, id)
		}
	}
	s.delReplay(id)
	delete(s.redelivery, id)
	delete(s.delayed, id)
	delete(s.batchAcks, id)
	delete(s.txnAcks, id) // a plain acknowledgement wins over a transaction's, as in Pulsar
}

func (s *subscription) fullAck(id int64) {
	if id <= s.markDelete || id >= s.t.next {
		return
	}
	s.forget(id)
	s.acked[id] = struct{}{}
	s.advanceMarkDelete()
}

func (s *subscription) ackUpTo(id int64) {
	id = min(id, s.t.next-1)
	for x := s.markDelete + 1; x <= id; x++ {
		s.forget(x)
		delete(s.acked, x)
	}
	if id > s.markDelete {
		s.markDelete = id
	}
	s.advanceMarkDelete()
}

func (s *subscription) partialAck(id int64, set []int64) {
	if id <= s.markDelete || id >= s.t.next {
		return
	}
	if have, ok := s.batchAcks[id]; ok {
		merged := make([]int64, min(len(have), len(set)))
		for i := range merged {
			merged[i] = have[i] & set[i]
		}
		set = merged
	}
	if !anyBit(set) {
		s.fullAck(id)
		return
	}
	s.batchAcks[id] = append([]int64(nil), set...)
}

func (s *subscription) unpend(k *consumer, id int64) {
	pe := k.pending[id]
	delete(k.pending, id)
	if h := s.holds[pe.hash]; h != nil && h.k == k {
		if h.n--; h.n <= 0 {
			delete(s.holds, pe.hash)
		}
	}
}

func (s *subscription) addReplay(id int64) {
	if _, ok := s.replay[id]; ok {
		return
	}
	s.replay[id] = struct{}{}
	if e := s.t.entry(id); e != nil {
		s.replayHashes[e.hash]++
	}
}

func (s *subscription) delReplay(id int64) {
	if _, ok := s.replay[id]; !ok {
		return
	}
	delete(s.replay, id)
	if e := s.t.entry(id); e != nil {
		if s.replayHashes[e.hash]--; s.replayHashes[e.hash] <= 0 {
			delete(s.replayHashes, e.hash)
		}
	}
}

// message builds the MESSAGE frame for e and deducts the consumer's permits.
func (s *subscription) message(k *consumer, e *entry, redeliveries int) outbound {
	cm := &wire.CommandMessage{
		ConsumerId: ptr(k.id),
		MessageId: &wire.MessageIdData{
			LedgerId: ptr(s.t.ledgerID), EntryId: ptr(uint64(e.id)), Partition: ptr(s.t.partition), //nolint:gosec // >= 0
		},
	}
	if redeliveries > 0 {
		cm.RedeliveryCount = ptr(uint32(redeliveries)) //nolint:gosec // small
	}
	msgs := e.numMsgs
	if set, ok := s.batchAcks[e.id]; ok {
		cm.AckSet = set
		msgs = popcount(set)
	}
	k.permits -= int64(msgs)
	var bem *wire.BrokerEntryMetadata
	if s.t.b.opts.brokerEntryMetadata {
		bem = &wire.BrokerEntryMetadata{BrokerTimestamp: ptr(uint64(e.brokerTime)), Index: ptr(uint64(e.index))} //nolint:gosec // >= 0
	}
	cmd := &wire.BaseCommand{Type: cmdType(wire.BaseCommand_MESSAGE), Message: cm}
	if k.c.dropped(false, cmd) {
		return outbound{} // lost on the way: pending and permits are accounted as if sent
	}
	frame, err := wire.EncodePayloadCommand(cmd, bem, e.raw)
	if err != nil {
		s.t.b.log.Error("pulsartest: encode message", "err", err)
		return outbound{}
	}
	k.c.trace("out", cmd)
	return outbound{k.c, frame}
}

func (s *subscription) dispatch(now int64, outs []outbound) []outbound {
	if len(s.consumers) == 0 {
		return outs
	}
	if s.singleActive() {
		return s.dispatchSingle(outs)
	}
	return s.dispatchMulti(now, outs)
}

func (s *subscription) dispatchSingle(outs []outbound) []outbound {
	a := s.active
	if a == nil || !a.flowSeen || s.holdActive {
		return outs
	}
	s.readPos = max(s.readPos, s.markDelete+1, s.t.first)
	limit := s.t.readLimit()
	for a.permits > 0 && s.readPos < limit {
		id := s.readPos
		s.readPos++
		if s.isAcked(id) || s.txnHeld(id) || s.skipAborted(s.t.entry(id)) {
			continue
		}
		if o := s.message(a, s.t.entry(id), 0); o.c != nil {
			outs = append(outs, o)
		}
	}
	return outs
}

func (s *subscription) anyReady() bool {
	for _, k := range s.consumers {
		if k.ready() {
			return true
		}
	}
	return false
}

func (s *subscription) keyShared() bool { return s.subType == wire.CommandSubscribe_Key_Shared }

//nolint:gocognit,cyclop // one pass over replay and new entries
func (s *subscription) dispatchMulti(now int64, outs []outbound) []outbound {
	for id, at := range s.delayed {
		if at <= now {
			delete(s.delayed, id)
			s.addReplay(id)
		}
	}
	defer s.scheduleTimer()
	if !s.anyReady() {
		return outs
	}
	blocked := map[uint32]bool{}
	if len(s.replay) > 0 {
		for _, id := range sortedIDs(s.replay) {
			e := s.t.entry(id)
			if e == nil || s.isAcked(id) || s.txnHeld(id) {
				s.delReplay(id)
				continue
			}
			if blocked[e.hash] && s.keyShared() {
				continue
			}
			k := s.pick(e)
			if k == nil {
				if !s.keyShared() {
					return outs
				}
				blocked[e.hash] = true
				continue
			}
			s.delReplay(id)
			outs = s.deliver(k, e, outs)
			if !s.anyReady() {
				return outs
			}
		}
	}
	s.readPos = max(s.readPos, s.markDelete+1, s.t.first)
	limit := s.t.readLimit()
	for s.readPos < limit {
		id := s.readPos
		e := s.t.entry(id)
		if s.isAcked(id) || s.txnHeld(id) || s.skipAborted(e) {
			s.readPos++
			continue
		}
		if e.dueAt > now {
			s.delayed[id] = e.dueAt
			s.readPos++
			continue
		}
		if s.keyShared() && (s.replayHashes[e.hash] > 0 || blocked[e.hash]) {
			s.addReplay(id)
			s.readPos++
			continue
		}
		k := s.pick(e)
		if k == nil {
			if !s.keyShared() {
				return outs
			}
			s.addReplay(id)
			blocked[e.hash] = true
			s.readPos++
			continue
		}
		s.readPos++
		outs = s.deliver(k, e, outs)
		if !s.anyReady() {
			return outs
		}
	}
	return outs
}

func (s *subscription) deliver(k *consumer, e *entry, outs []outbound) []outbound {
	msgs := e.numMsgs
	if set, ok := s.batchAcks[e.id]; ok {
		msgs = popcount(set)
	}
	k.pending[e.id] = pendingEntry{msgs: msgs, hash: e.hash}
	if s.keyShared() {
		if h := s.holds[e.hash]; h != nil && h.k == k {
			h.n++
		} else {
			s.holds[e.hash] = &hashHold{k: k, n: 1}
		}
	}
	if e.uuid != "" {
		if e.lastChunk {
			delete(s.chunkOwner, e.uuid)
		} else {
			s.chunkOwner[e.uuid] = k
		}
	}
	if o := s.message(k, e, s.redelivery[e.id]); o.c != nil {
		outs = append(outs, o)
	}
	return outs
}

// pick chooses the consumer for e, or nil when it must wait.
func (s *subscription) pick(e *entry) *consumer {
	if e.uuid != "" {
		if k := s.chunkOwner[e.uuid]; k != nil && !k.removed {
			if k.ready() {
				return k
			}
			return nil
		}
	}
	if s.keyShared() {
		k := s.owner(e.hash)
		if k == nil || !k.ready() {
			return nil
		}
		if h := s.holds[e.hash]; h != nil && h.k != k && !s.allowOOO {
			return nil // draining: the previous owner still has unacked entries of this hash
		}
		return k
	}
	return s.pickShared()
}

// pickShared chooses a Shared consumer as Pulsar's getNextConsumer does: only the ready consumers of the highest
// priority (the lowest priority_level) are candidates, and among them the current one keeps receiving up to
// maxRoundRobinBatch entries before the turn passes to the next one of that level. s.consumers is sorted by
// priority, so a cyclic scan from the current consumer stays in round-robin order within a level and reaches the
// first consumer of a level when it comes from another level.
func (s *subscription) pickShared() *consumer {
	var best *consumer
	for _, k := range s.consumers {
		if k.ready() && (best == nil || k.priority < best.priority) {
			best = k
		}
	}
	if best == nil {
		return nil
	}
	n := len(s.consumers)
	if s.rrIdx >= n {
		s.rrIdx, s.rrGiven = 0, 0
	}
	if cur := s.consumers[s.rrIdx]; cur.ready() && cur.priority == best.priority && s.rrGiven < maxRoundRobinBatch {
		s.rrGiven++
		return cur
	}
	for i := 1; i <= n; i++ {
		idx := (s.rrIdx + i) % n
		if k := s.consumers[idx]; k.ready() && k.priority == best.priority {
			s.rrIdx, s.rrGiven = idx, 1
			return k
		}
	}
	return best
}

// addConsumer inserts k after the consumers of its priority level or a higher one, keeping s.consumers sorted
// by priority and in arrival order within a level, as Pulsar keeps its dispatchers' consumer lists.
func (s *subscription) addConsumer(k *consumer) {
	i := len(s.consumers)
	for i > 0 && s.consumers[i-1].priority > k.priority {
		i--
	}
	s.consumers = slices.Insert(s.consumers, i, k)
	if i <= s.rrIdx && len(s.consumers) > 1 {
		s.rrIdx++ // the current consumer keeps its turn
	}
}

func (s *subscription) autoSplit() bool {
	return s.keyShared() && s.ksMode == wire.KeySharedMode_AUTO_SPLIT &&
		s.t.b.opts.keySharedSelector == AutoSplitHashRange
}

// splitAdd gives k half of the largest hash range; it reports false when no range can be split.
func (s *subscription) splitAdd(k *consumer) bool {
	if len(s.splits) == 0 {
		s.splits = []splitRange{{end: ksRangeSize - 1, k: k}}
		return true
	}
	best, bestSize, prev := 0, int32(-1), int32(-1)
	for i, r := range s.splits {
		if size := r.end - prev; size > bestSize {
			best, bestSize = i, size
		}
		prev = r.end
	}
	if bestSize < 2 {
		return false
	}
	start := int32(0)
	if best > 0 {
		start = s.splits[best-1].end + 1
	}
	s.splits = append(s.splits[:best], append([]splitRange{{end: start + bestSize/2 - 1, k: k}}, s.splits[best:]...)...)
	return true
}

// splitRemove merges k's range into the next one (the last range merges into the previous one).
func (s *subscription) splitRemove(k *consumer) {
	for i, r := range s.splits {
		if r.k != k {
			continue
		}
		if i == len(s.splits)-1 && i > 0 {
			s.splits[i-1].end = r.end
		}
		s.splits = append(s.splits[:i], s.splits[i+1:]...)
		return
	}
}

func (s *subscription) membershipChanged() {
	if !s.keyShared() || s.ksMode == wire.KeySharedMode_STICKY || s.autoSplit() {
		s.ring = nil
		return
	}
	s.ring = s.ring[:0]
	for _, k := range s.consumers {
		for i := range ringPointsPerKey {
			s.ring = append(s.ring, ringPoint{hash: murmur3([]byte(k.name + strconv.Itoa(i))), k: k})
		}
	}
	sort.SliceStable(s.ring, func(i, j int) bool { return s.ring[i].hash < s.ring[j].hash })
}

// owner returns the Key_Shared consumer owning hash h.
func (s *subscription) owner(h uint32) *consumer {
	if s.ksMode == wire.KeySharedMode_STICKY {
		slot := int32(h % ksRangeSize)
		for _, k := range s.consumers {
			for _, r := range k.ranges {
				if r.start <= slot && slot <= r.end {
					return k
				}
			}
		}
		return nil
	}
	if s.autoSplit() {
		slot := int32(h % ksRangeSize)
		i := sort.Search(len(s.splits), func(i int) bool { return s.splits[i].end >= slot })
		if i == len(s.splits) {
			return nil
		}
		return s.splits[i].k
	}
	if len(s.ring) == 0 {
		return nil
	}
	i := sort.Search(len(s.ring), func(i int) bool { return s.ring[i].hash >= h })
	if i == len(s.ring) {
		i = 0
	}
	return s.ring[i].k
}

// pickActive chooses the active consumer of an Exclusive or Failover subscription; a change rewinds the cursor.
func (s *subscription) pickActive(outs []outbound) []outbound {
	var next *consumer
	if n := len(s.consumers); n > 0 {
		next = s.consumers[0]
		if s.subType == wire.CommandSubscribe_Failover {
			// As Pulsar's pickAndScheduleActiveConsumer: sorted by priority level, then name; only the
			// consumers of the highest priority are candidates.
			sorted := append([]*consumer(nil), s.consumers...)
			sort.SliceStable(sorted, func(i, j int) bool {
				if sorted[i].priority != sorted[j].priority {
					return sorted[i].priority < sorted[j].priority
				}
				return sorted[i].name < sorted[j].name
			})
			for i, k := range sorted {
				if k.priority != sorted[0].priority {
					sorted = sorted[:i]
					break
				}
			}
			n = len(sorted)
			switch {
			case s.t.partition >= 0:
				next = sorted[int(s.t.partition)%n]
			case s.t.b.opts.failoverSelection == ConsistentHash:
				ring := make([]ringPoint, 0, n*ringPointsPerKey)
				for _, k := range sorted {
					for i := range ringPointsPerKey {
						ring = append(ring, ringPoint{hash: murmur3([]byte(k.name + strconv.Itoa(i))), k: k})
					}
				}
				sort.SliceStable(ring, func(i, j int) bool { return ring[i].hash < ring[j].hash })
				h := murmur3([]byte(s.t.name))
				i := sort.Search(len(ring), func(i int) bool { return ring[i].hash >= h }) % len(ring)
				for i+1 < len(ring) && ring[i+1].hash == ring[i].hash {
					i++ // Pulsar's ring is a map: of two equal points the later consumer's wins
				}
				next = ring[i].k
			default:
				next = sorted[0]
			}
		}
	}
	if next != s.active {
		failover := s.active != nil && next != nil && s.subType == wire.CommandSubscribe_Failover
		s.active = next
		s.readPos = s.markDelete + 1
		if failover && s.t.b.opts.realisticTiming {
			s.delayActive(next)
		}
	}
	if s.subType == wire.CommandSubscribe_Failover {
		outs = s.notifyActive(outs)
	}
	return outs
}

// notifyActive sends ACTIVE_CONSUMER_CHANGE to every consumer (after its first FLOW) whose state changed.
func (s *subscription) notifyActive(outs []outbound) []outbound {
	for _, k := range s.consumers {
		if !k.flowSeen {
			continue
		}
		want := int8(2)
		if k == s.active {
			want = 1
		}
		if k.active == want {
			continue
		}
		k.active = want
		outs = append(outs, outbound{k.c, k.c.encode(&wire.BaseCommand{
			Type:                 cmdType(wire.BaseCommand_ACTIVE_CONSUMER_CHANGE),
			ActiveConsumerChange: &wire.CommandActiveConsumerChange{ConsumerId: ptr(k.id), IsActive: ptr(want == 1)},
		})})
	}
	return outs
}

// scheduleTimer arms one timer for the earliest delayed entry, to fire when its millisecond
// begins on the broker's clock (not a whole number of milliseconds after this one's start).
func (s *subscription) scheduleTimer() {
	if len(s.delayed) == 0 {
		s.stopDelayedTimer()
		return
	}
	at := int64(-1)
	for _, d := range s.delayed {
		if at < 0 || d < at {
			at = d
		}
	}
	if s.t.b.opts.realisticTiming {
		const tick = int64(realisticDelay / 1e6)
		at = (at + tick - 1) / tick * tick
	}
	if s.timerStop != nil && s.timerAt == at {
		return
	}
	s.stopDelayedTimer()
	t := s.t
	s.timerAt = at
	s.timerStop = t.b.opts.clock.AfterFunc(max(time.UnixMilli(at).Sub(t.b.opts.clock.Now()), 0), func() {
		if !t.b.enter() {
			return
		}
		defer t.b.wg.Done()
		t.kick()
	})
}

// delayActive holds dispatch to a new active consumer for the failover delay of a real broker
// (activeConsumerFailoverDelayTimeMillis), then rewinds and starts it.
func (s *subscription) delayActive(next *consumer) {
	if s.failoverStop != nil {
		s.failoverStop()
	}
	s.holdActive = true
	t := s.t
	s.failoverStop = t.b.opts.clock.AfterFunc(realisticDelay, func() {
		if !t.b.enter() {
			return
		}
		defer t.b.wg.Done()
		t.mu.Lock()
		if s.active == next && s.holdActive {
			s.holdActive, s.failoverStop = false, nil
			s.readPos = s.markDelete + 1
		}
		outs := t.dispatchLocked(nil)
		t.mu.Unlock()
		send(outs)
	})
}
