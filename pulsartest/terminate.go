package pulsartest

import (
	"fmt"
	"net/http"
)

// Topic termination (POST …/terminate, …/partitions/terminate): the topic takes no more messages. Its
// producers are disconnected (CLOSE_PRODUCER), and a PRODUCER or SEND on it is refused with
// TopicTerminatedError, on which the client closes the producer for good. Consumers read what was
// stored.

// TerminateTopic terminates a topic (every partition of a partitioned topic).
func (b *Broker) TerminateTopic(name string) error {
	ts := b.topicsFor(name)
	if len(ts) == 0 {
		return fmt.Errorf("%w: %s", ErrTopicNotFound, name)
	}
	for _, t := range ts {
		t.terminate()
	}
	return nil
}

// terminate sets the flag and closes the producers under the topic's lock, so that a SEND racing
// it is either stored before the last id reported or finds its producer closed (conn.handleSend).
// Done in two steps, a SEND in between was answered TopicTerminatedError, on which
// pulsar-client-go (v0.19.0, and v0.21.0 alike: connection.handleSendError) unregisters the
// producer from the connection and so ignores the CLOSE_PRODUCER that follows: its sends then
// only time out (the flake of the client's own TestTopicTermination on this broker).
func (t *topic) terminate() {
	t.mu.Lock()
	t.terminated.Store(true)
	var outs []outbound
	for p := range t.producers {
		outs = append(outs, p.c.closeProducer(p))
		outs = t.removeProducerLocked(p, outs)
	}
	t.mu.Unlock()
	send(outs)
}

// lastID returns the ledger and entry id of the topic's last entry (entry -1 when empty).
func (t *topic) lastID() (uint64, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.ledgerID, t.next - 1
}

func (a *adminServer) terminateTopic(w http.ResponseWriter, r *http.Request) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	if a.b.partitions(fq) > 0 {
		writeReason(w, http.StatusMethodNotAllowed, "Termination of a partitioned topic is not allowed")
		return
	}
	t, err := a.b.getTopic(fq, false)
	if err != nil {
		writeReason(w, http.StatusNotFound, topicNotFound(fq))
		return
	}
	t.terminate()
	l, e := t.lastID()
	writeJSON(w, http.StatusOK, map[string]int64{"ledgerId": int64(l), "entryId": e, "partitionIndex": -1}) //nolint:gosec // small
}

func (a *adminServer) terminatePartitioned(w http.ResponseWriter, r *http.Request) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	if a.b.partitions(fq) == 0 {
		writeReason(w, http.StatusNotFound, "Partitioned topic does not exist")
		return
	}
	out := map[int]map[string]int64{}
	for _, t := range a.b.topicsFor(fq) {
		t.terminate()
		l, e := t.lastID()
		out[int(t.partition)] = map[string]int64{"ledgerId": int64(l), "entryId": e, "partitionIndex": int64(t.partition)} //nolint:gosec // small
	}
	writeJSON(w, http.StatusOK, out)
}
