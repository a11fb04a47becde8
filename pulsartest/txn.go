package pulsartest

import (
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"sync"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// The transaction coordinator subset (WithTransactions). One coordinator (id 0), as in a Pulsar
// standalone: the partitioned topic tcAssignTopic has one partition, which LOOKUP answers
// with this broker. A transaction's sends are stored at once and held back from every
// subscription of their topic (with everything stored after them) until it ends, Pulsar's
// maxReadPosition; its acknowledgements are pending on their subscription until it ends.
//
// Locks: a topic's lock may be held while taking the coordinator's (a SEND or an ACK checks
// and registers its transaction), never the other way round: END_TXN and the timeout take the
// transaction out under the coordinator's lock and settle its topics after releasing it.

// tcAssignTopic is the partitioned topic whose partitions name the transaction coordinators.
const tcAssignTopic = "persistent://pulsar/system/transaction_coordinator_assign"

// numCoordinators is the partition count of tcAssignTopic, as in a Pulsar standalone.
const numCoordinators = 1

// txnID is a transaction id: the coordinator in the most significant bits, a sequence in the least.
type txnID struct{ most, least uint64 }

// String renders the id as Pulsar's TxnID.toString does.
func (x txnID) String() string {
	return "(" + strconv.FormatUint(x.most, 10) + "," + strconv.FormatUint(x.least, 10) + ")"
}

// txnRecord is an open transaction. Guarded by the coordinator's lock.
type txnRecord struct {
	id                  txnID
	openedAt, timeoutAt int64 // ms
	stop                func() bool
	produced            map[string]struct{}            // ADD_PARTITION_TO_TXN, as the client named them (admin stats)
	ackedOn             map[string]map[string]struct{} // ADD_SUBSCRIPTION_TO_TXN: topic -> subscriptions (admin stats)
	topics              map[*topic]struct{}            // topics it sent to
	subs                map[*subscription]struct{}     // subscriptions it acknowledged on
}

type coordinator struct {
	b   *Broker
	mu  sync.Mutex
	seq uint64
	txs map[txnID]*txnRecord
}

func newCoordinator(b *Broker) *coordinator {
	return &coordinator{b: b, txs: map[txnID]*txnRecord{}}
}

// txnNotFound is Pulsar 4.0's text (TransactionNotFound) for a transaction the coordinator does not
// know: never opened, or already ended (committed, aborted or timed out).
func txnNotFound(x txnID) string {
	return "The transaction with this txdID `" + x.String() + "`not found "
}

// tcNotFound is Pulsar 4.0's text (TransactionCoordinatorNotFound) for a coordinator id it does not run.
func tcNotFound(id uint64) string {
	return "Transaction coordinator with id " + strconv.FormatUint(id, 10) + " not found!"
}

// lookupErr checks that x names an open transaction of a coordinator this broker runs.
func (tc *coordinator) lookupLocked(x txnID) (*txnRecord, ServerError, string) {
	if x.most >= numCoordinators {
		return nil, ServerError(wire.ServerError_TransactionCoordinatorNotFound), tcNotFound(x.most)
	}
	r := tc.txs[x]
	if r == nil {
		return nil, ServerError(wire.ServerError_TransactionNotFound), txnNotFound(x)
	}
	return r, 0, ""
}

// open starts a transaction on coordinator id that the broker aborts after ttlMs milliseconds.
func (tc *coordinator) open(id, ttlMs uint64) (txnID, ServerError, string) {
	if id >= numCoordinators {
		return txnID{most: id}, ServerError(wire.ServerError_TransactionCoordinatorNotFound), tcNotFound(id)
	}
	now := tc.b.opts.clock.Now().UnixMilli()
	tc.mu.Lock()
	defer tc.mu.Unlock()
	x := txnID{most: id, least: tc.seq}
	tc.seq++
	r := &txnRecord{
		id: x, openedAt: now, timeoutAt: now + int64(min(ttlMs, 1<<40)),
		produced: map[string]struct{}{}, ackedOn: map[string]map[string]struct{}{},
		topics: map[*topic]struct{}{}, subs: map[*subscription]struct{}{},
	}
	tc.txs[x] = r
	r.stop = tc.b.opts.clock.AfterFunc(durationMs(int64(min(ttlMs, 1<<40))), func() {
		if !tc.b.enter() {
			return
		}
		defer tc.b.wg.Done()
		if tc.end(x, false, true) == 0 {
			tc.b.log.Debug("pulsartest: transaction timed out, aborted", "txn", x.String())
		}
	})
	return x, 0, ""
}

// addPartitions records the partitions a transaction will send to (for the admin stats).
func (tc *coordinator) addPartitions(x txnID, partitions []string) (ServerError, string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	r, code, msg := tc.lookupLocked(x)
	if r == nil {
		return code, msg
	}
	for _, p := range partitions {
		r.produced[p] = struct{}{}
	}
	return 0, ""
}

// addSubscriptions records the subscriptions a transaction will acknowledge on (for the admin stats).
func (tc *coordinator) addSubscriptions(x txnID, subs []*wire.Subscription) (ServerError, string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	r, code, msg := tc.lookupLocked(x)
	if r == nil {
		return code, msg
	}
	for _, s := range subs {
		m := r.ackedOn[s.GetTopic()]
		if m == nil {
			m = map[string]struct{}{}
			r.ackedOn[s.GetTopic()] = m
		}
		m[s.GetSubscription()] = struct{}{}
	}
	return 0, ""
}

// joinTopic registers t with an open transaction x; false when x is not open. The caller holds t's lock.
func (tc *coordinator) joinTopic(x txnID, t *topic) bool {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	r := tc.txs[x]
	if r == nil {
		return false
	}
	r.topics[t] = struct{}{}
	return true
}

// joinSubscription registers s with an open transaction x, or answers why not. The caller holds s's topic lock.
func (tc *coordinator) joinSubscription(x txnID, s *subscription) (ServerError, string) {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	r, code, msg := tc.lookupLocked(x)
	if r == nil {
		return code, msg
	}
	r.subs[s] = struct{}{}
	return 0, ""
}

// end commits (or aborts) x and settles its topics and subscriptions; 0 or why it cannot.
func (tc *coordinator) end(x txnID, commit, timedOut bool) ServerError {
	tc.mu.Lock()
	r, code, _ := tc.lookupLocked(x)
	if r != nil {
		delete(tc.txs, x)
		if !timedOut {
			r.stop()
		}
	}
	tc.mu.Unlock()
	if r == nil {
		return code
	}
	for t := range r.topics {
		t.endTxn(x, commit)
	}
	for s := range r.subs {
		s.t.endTxnAcks(s, x, commit)
	}
	return 0
}

// close stops the timeout timers (Broker.Close).
func (tc *coordinator) close() {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	for _, r := range tc.txs {
		r.stop()
	}
}

// txnOf returns the transaction id a command carries, if it carries one.
func txnOf(most, least *uint64) (txnID, bool) {
	if most == nil && least == nil {
		return txnID{}, false
	}
	var x txnID
	if most != nil {
		x.most = *most
	}
	if least != nil {
		x.least = *least
	}
	return x, true
}

// txnRefused is the answer to a transaction command when the broker runs without WithTransactions.
const txnRefused = "pulsartest: transactions are not supported unless the broker runs WithTransactions " +
	"(bq broker --transactions), as Pulsar needs transactionCoordinatorEnabled=true"

// handleTxnCommand answers the coordinator's commands; false for a command that is not one.
//
//nolint:cyclop // one case per command
func (c *conn) handleTxnCommand(cmd *wire.BaseCommand) bool {
	tc := c.b.tc
	switch cmd.GetType() {
	case wire.BaseCommand_TC_CLIENT_CONNECT_REQUEST:
		m := cmd.GetTcClientConnectRequest()
		if tc == nil {
			c.sendError(m.GetRequestId(), NotAllowedError, "%s", txnRefused)
			return true
		}
		resp := &wire.CommandTcClientConnectResponse{RequestId: ptr(m.GetRequestId())}
		if m.GetTcId() >= numCoordinators {
			// Pulsar 4.0 answers ServiceNotReady: no broker serves the partition of a coordinator that does not exist.
			resp.Error = ServiceNotReady.wire()
			resp.Message = ptr(fmt.Sprintf("pulsartest: no transaction coordinator %d: %s-partition-%d does not exist "+
				"(the broker runs %d coordinator)", m.GetTcId(), tcAssignTopic, m.GetTcId(), numCoordinators))
		}
		c.sendCmd(&wire.BaseCommand{Type: cmdType(wire.BaseCommand_TC_CLIENT_CONNECT_RESPONSE), TcClientConnectResponse: resp})
	case wire.BaseCommand_NEW_TXN:
		m := cmd.GetNewTxn()
		if tc == nil {
			c.sendError(m.GetRequestId(), NotAllowedError, "%s", txnRefused)
			return true
		}
		x, code, msg := tc.open(m.GetTcId(), m.GetTxnTtlSeconds())
		c.sendTxnResponse(wire.BaseCommand_NEW_TXN_RESPONSE, m.GetRequestId(), x, code, msg)
	case wire.BaseCommand_ADD_PARTITION_TO_TXN:
		m := cmd.GetAddPartitionToTxn()
		if tc == nil {
			c.sendError(m.GetRequestId(), NotAllowedError, "%s", txnRefused)
			return true
		}
		x := txnID{most: m.GetTxnidMostBits(), least: m.GetTxnidLeastBits()}
		code, msg := tc.addPartitions(x, m.GetPartitions())
		c.sendTxnResponse(wire.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE, m.GetRequestId(), x, code, msg)
	case wire.BaseCommand_ADD_SUBSCRIPTION_TO_TXN:
		m := cmd.GetAddSubscriptionToTxn()
		if tc == nil {
			c.sendError(m.GetRequestId(), NotAllowedError, "%s", txnRefused)
			return true
		}
		x := txnID{most: m.GetTxnidMostBits(), least: m.GetTxnidLeastBits()}
		code, msg := tc.addSubscriptions(x, m.GetSubscription())
		c.sendTxnResponse(wire.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE, m.GetRequestId(), x, code, msg)
	case wire.BaseCommand_END_TXN:
		m := cmd.GetEndTxn()
		if tc == nil {
			c.sendError(m.GetRequestId(), NotAllowedError, "%s", txnRefused)
			return true
		}
		x := txnID{most: m.GetTxnidMostBits(), least: m.GetTxnidLeastBits()}
		var code ServerError
		var msg string
		switch m.GetTxnAction() {
		case wire.TxnAction_COMMIT, wire.TxnAction_ABORT:
			if code = tc.end(x, m.GetTxnAction() == wire.TxnAction_COMMIT, false); code != 0 {
				msg = txnNotFound(x)
				if x.most >= numCoordinators {
					msg = tcNotFound(x.most)
				}
			}
		default:
			code, msg = NotAllowedError, fmt.Sprintf("pulsartest: END_TXN with unknown txn_action %d", m.GetTxnAction())
		}
		c.sendTxnResponse(wire.BaseCommand_END_TXN_RESPONSE, m.GetRequestId(), x, code, msg)
	default:
		return false
	}
	return true
}

func (c *conn) sendTxnResponse(typ wire.BaseCommand_Type, reqID uint64, x txnID, code ServerError, msg string) {
	r := &wire.CommandTxnResponse{RequestId: ptr(reqID), TxnidMostBits: ptr(x.most), TxnidLeastBits: ptr(x.least)}
	if code != 0 {
		r.Error, r.Message = code.wire(), ptr(msg)
	}
	cmd := &wire.BaseCommand{Type: cmdType(typ)}
	switch typ {
	case wire.BaseCommand_NEW_TXN_RESPONSE:
		cmd.NewTxnResponse = r
	case wire.BaseCommand_ADD_PARTITION_TO_TXN_RESPONSE:
		cmd.AddPartitionToTxnResponse = r
	case wire.BaseCommand_ADD_SUBSCRIPTION_TO_TXN_RESPONSE:
		cmd.AddSubscriptionToTxnResponse = r
	default:
		cmd.EndTxnResponse = r
	}
	c.sendCmd(cmd)
}

// readLimit is the first entry no subscription may read yet: the first entry of the oldest open
// transaction on the topic (Pulsar's maxReadPosition), or the end. The caller holds t's lock.
func (t *topic) readLimit() int64 {
	limit := t.next
	for _, first := range t.openTxns {
		limit = min(limit, first)
	}
	return limit
}

// joinTxnLocked registers a SEND's entry e with its open transaction x; false when x is not
// open, and then e is stored as a plain entry (as Pulsar's buffer, which does not ask the
// coordinator, would store it; here it does not hold the topic back for ever).
func (t *topic) joinTxnLocked(x txnID, e *entry) {
	if _, ok := t.openTxns[x]; ok {
		return
	}
	if t.b.tc.joinTopic(x, t) {
		t.openTxns[x] = e.id
	}
}

// endTxn ends x on t: a commit releases its entries, an abort too but records x as aborted, so
// that entries whose metadata names x are skipped (TopicTransactionBuffer.isTxnAborted).
func (t *topic) endTxn(x txnID, commit bool) {
	t.mu.Lock()
	delete(t.openTxns, x)
	if !commit {
		t.abortedTxns[x] = struct{}{}
	}
	outs := t.dispatchLocked(nil)
	t.mu.Unlock()
	send(outs)
}

// skipAborted acknowledges e for s and reports true when e's metadata names a transaction that
// was aborted on the topic, as Pulsar's dispatcher does before it delivers an entry.
func (s *subscription) skipAborted(e *entry) bool {
	if e.txn == nil {
		return false
	}
	if _, ok := s.t.abortedTxns[*e.txn]; !ok {
		return false
	}
	s.fullAck(e.id)
	return true
}

// txnHeld reports whether entry id is acknowledged inside an open transaction on s.
func (s *subscription) txnHeld(id int64) bool {
	_, ok := s.txnAcks[id]
	return ok
}

// txnAck acknowledges the ids of m for k's subscription inside transaction x: each becomes
// pending until x ends. It answers Pulsar's conflict errors when an id is already acknowledged
// or already pending in a transaction.
func (t *topic) txnAck(k *consumer, m *wire.CommandAck, x txnID) (ServerError, string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := k.sub
	if m.GetAckType() == wire.CommandAck_Cumulative {
		return NotAllowedError, "pulsartest: cumulative acknowledgements inside a transaction are not supported"
	}
	ids := make([]int64, 0, len(m.GetMessageId()))
	for _, id := range m.GetMessageId() {
		if set := id.GetAckSet(); len(set) > 0 && anyBit(set) {
			return NotAllowedError, "pulsartest: batch-index acknowledgements inside a transaction are not supported"
		}
		eid := int64(id.GetEntryId()) //nolint:gosec // entry ids are small
		what := ""
		switch {
		case s.isAcked(eid) || id.GetLedgerId() != t.ledgerID || eid >= t.next:
			what = "already acked before."
		case s.txnHeld(eid):
			what = "in pending ack status."
		}
		if what != "" {
			return ServerError(wire.ServerError_TransactionConflict), fmt.Sprintf(
				"org.apache.pulsar.transaction.common.exception.TransactionConflictException: [%s][%s] Transaction:%s "+
					"try to ack message:%d:%d (ackSet is null) %s", t.name, s.name, x, id.GetLedgerId(), id.GetEntryId(), what)
		}
		ids = append(ids, eid)
	}
	if code, msg := t.b.tc.joinSubscription(x, s); msg != "" {
		return code, msg
	}
	for _, id := range ids {
		for _, o := range s.consumers {
			if _, ok := o.pending[id]; ok {
				s.unpend(o, id)
			}
		}
		s.delReplay(id)
		s.txnAcks[id] = x
	}
	return 0, ""
}

// endTxnAcks settles what x acknowledged on s: a commit acknowledges it, an abort gives it back for
// redelivery (with a raised redelivery count on Shared and Key_Shared; a rewind on Exclusive and
// Failover, as any redelivery there).
func (t *topic) endTxnAcks(s *subscription, x txnID, commit bool) {
	t.mu.Lock()
	var ids []int64
	for id, owner := range s.txnAcks {
		if owner == x {
			ids = append(ids, id)
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	for _, id := range ids {
		delete(s.txnAcks, id)
		switch {
		case commit:
			s.fullAck(id)
		case s.singleActive():
			s.readPos = min(s.readPos, s.markDelete+1)
		default:
			s.redelivery[id]++
			s.addReplay(id)
		}
	}
	outs := t.dispatchLocked(nil)
	t.mu.Unlock()
	send(outs)
}

// transactionMetadata answers GET /admin/v3/transactions/transactionMetadata/{most}/{least} with the
// fields of Pulsar's TransactionMetadata that tests read; 404 once the transaction ended, as in Pulsar.
func (a *adminServer) transactionMetadata(w http.ResponseWriter, r *http.Request) {
	tc := a.b.tc
	if tc == nil {
		writeReason(w, http.StatusServiceUnavailable, "pulsartest: "+txnRefused)
		return
	}
	most, err1 := strconv.ParseUint(r.PathValue("most"), 10, 64)
	least, err2 := strconv.ParseUint(r.PathValue("least"), 10, 64)
	if err1 != nil || err2 != nil {
		writeReason(w, http.StatusBadRequest, fmt.Sprintf("pulsartest: transaction id %q/%q: want two unsigned numbers",
			r.PathValue("most"), r.PathValue("least")))
		return
	}
	x := txnID{most: most, least: least}
	tc.mu.Lock()
	rec, _, msg := tc.lookupLocked(x)
	if rec == nil {
		tc.mu.Unlock()
		writeReason(w, http.StatusNotFound, msg)
		return
	}
	produced := map[string]any{}
	for p := range rec.produced {
		produced[p] = map[string]any{"aborted": false}
	}
	acked := map[string]any{}
	for topic, subs := range rec.ackedOn {
		m := map[string]any{}
		for s := range subs {
			m[s] = map[string]any{"cumulativeAckPosition": nil}
		}
		acked[topic] = m
	}
	body := map[string]any{
		"txnId": x.String(), "status": "OPEN", "openTimestamp": rec.openedAt, "timeoutAt": rec.timeoutAt,
		"producedPartitions": produced, "ackedPartitions": acked,
	}
	tc.mu.Unlock()
	writeJSON(w, http.StatusOK, body)
}

// handleTxnAck acknowledges inside transaction x and answers ACK_RESPONSE (the client always asks
// for one with a transaction), with the error when the acknowledgement is refused.
func (c *conn) handleTxnAck(k *consumer, m *wire.CommandAck, x txnID) {
	code, msg := NotAllowedError, txnRefused
	if c.b.tc != nil {
		code, msg = k.sub.t.txnAck(k, m, x)
	}
	if m.RequestId == nil {
		if msg != "" {
			c.log.Warn("pulsartest: acknowledgement in a transaction refused", "txn", x.String(), "reason", msg)
		}
		return
	}
	resp := &wire.CommandAckResponse{
		ConsumerId: ptr(m.GetConsumerId()), RequestId: ptr(m.GetRequestId()),
		TxnidMostBits: ptr(x.most), TxnidLeastBits: ptr(x.least),
	}
	if msg != "" {
		resp.Error, resp.Message = code.wire(), ptr(msg)
	}
	c.sendCmd(&wire.BaseCommand{Type: cmdType(wire.BaseCommand_ACK_RESPONSE), AckResponse: resp})
	if msg == "" {
		k.sub.t.kick()
	}
}
