package pulsartest

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// registerPeek adds the "peek messages" endpoint of a subscription:
// GET …/{topic}/subscription/{sub}/position/{n} answers the n-th entry (1-based) after the
// subscription's mark-delete position that it has not acknowledged, like a real broker
// (individually acknowledged entries are skipped). It moves no cursor and counts no
// redelivery, but, as in Pulsar, it creates the subscription when it does not exist:
// durable, at the earliest entry. The entry's metadata is in X-Pulsar-* headers (properties
// as one JSON header, X-Pulsar-PROPERTY) and its payload (a batch's length-prefixed
// messages) in the body, uncompressed. A partitioned topic is refused with 405 (peek its
// partitions); a missing topic or position is 404.
func (a *adminServer) registerPeek(mux *http.ServeMux, base string) {
	mux.HandleFunc("GET "+base+"/{topic}/subscription/{sub}/position/{n}", a.peekMessage)
}

// peekTimeLayout is how a real broker formats the X-Pulsar-*-time headers.
const peekTimeLayout = "2006-01-02T15:04:05.000-0700"

func (a *adminServer) peekMessage(w http.ResponseWriter, r *http.Request) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || n < 1 {
		writeReason(w, http.StatusPreconditionFailed, fmt.Sprintf("pulsartest: position %q must be a number >= 1", r.PathValue("n")))
		return
	}
	if a.b.partitions(fq) > 0 {
		writeReason(w, http.StatusMethodNotAllowed, "Peek messages on a partitioned topic is not allowed")
		return
	}
	t, err := a.b.getTopic(fq, false)
	if errors.Is(err, ErrTopicNotFound) {
		writeReason(w, http.StatusNotFound, topicNotFound(fq))
		return
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	raw, id, found := t.peekNth(r.PathValue("sub"), n)
	if !found {
		writeReason(w, http.StatusNotFound, "Message not found")
		return
	}
	md, payload, ok := entryResponse(w, raw, "peeking at", t.ledgerID, id)
	if !ok {
		return
	}
	h := w.Header()
	if props := md.GetProperties(); len(props) > 0 {
		m := make(map[string]string, len(props))
		for _, kv := range props {
			m[kv.GetKey()] = kv.GetValue()
		}
		js, err := json.Marshal(m)
		if err != nil {
			writeReason(w, http.StatusInternalServerError, err.Error())
			return
		}
		h.Set("X-Pulsar-PROPERTY", headerText(string(js)))
	}
	if md.PublishTime != nil {
		h.Set("X-Pulsar-publish-time", time.UnixMilli(int64(md.GetPublishTime())).UTC().Format(peekTimeLayout)) //nolint:gosec // ms timestamps
	}
	if md.EventTime != nil {
		h.Set("X-Pulsar-event-time", time.UnixMilli(int64(md.GetEventTime())).UTC().Format(peekTimeLayout)) //nolint:gosec // ms timestamps
	}
	if md.NumMessagesInBatch != nil {
		h.Set("X-Pulsar-num-batch-message", strconv.Itoa(int(md.GetNumMessagesInBatch())))
	}
	if md.PartitionKey != nil {
		h.Set("X-Pulsar-partition-key", headerText(md.GetPartitionKey()))
	}
	h.Set("X-Pulsar-producer-name", headerText(md.GetProducerName()))
	h.Set("X-Pulsar-sequence-id", strconv.FormatUint(md.GetSequenceId(), 10))
	w.WriteHeader(http.StatusOK)
	// An octet-stream of stored message bytes, as a real broker answers; never rendered as HTML.
	_, _ = w.Write(payload) //nolint:gosec // G705: application/octet-stream, not markup
}

// peekNth returns the stored bytes and id of the n-th entry (1-based) after the mark-delete
// position of subscription sub that sub has not acknowledged. A subscription that does not
// exist is created first, durable and at the earliest entry, as Pulsar's admin API does
// (PersistentTopicsBase.getSubscriptionReference creates the subscription it looks up).
func (t *topic) peekNth(sub string, n int) (raw []byte, id int64, found bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.subs[sub]
	if s == nil {
		s = t.newSubscription(sub, true, wire.CommandSubscribe_Exclusive, nil)
		s.setPosition(t.first)
		t.subs[sub] = s
	}
	for id := max(s.markDelete+1, t.first); id < t.next; id++ {
		if _, ok := s.acked[id]; ok {
			continue
		}
		if n--; n == 0 {
			return t.entry(id).raw, id, true
		}
	}
	return nil, 0, false
}

// entryResponse starts the answer of an admin call that returns one stored entry's payload
// (peek, get a message by id): it parses the entry's metadata, uncompresses the payload as
// Pulsar does, sets the content type and the X-Pulsar-Message-ID, X-Pulsar-compression and
// X-Pulsar-uncompressed-size headers, and returns the metadata and the uncompressed payload.
// When the entry cannot be returned it writes the error instead and returns ok false; verb
// names the operation in that error.
func entryResponse(w http.ResponseWriter, raw []byte, verb string, ledger uint64, entry int64) (md *wire.MessageMetadata, payload []byte, ok bool) {
	md, err := wire.ParsePayload(raw)
	if err != nil {
		writeReason(w, http.StatusInternalServerError, err.Error())
		return nil, nil, false
	}
	metaSize := int(binary.BigEndian.Uint32(raw[6:]))
	payload, err = uncompress(md.GetCompression(), raw[10+metaSize:], int(md.GetUncompressedSize()))
	if err != nil {
		writeReason(w, http.StatusInternalServerError, fmt.Sprintf("%v (%s entry %d:%d)", err, verb, ledger, entry))
		return nil, nil, false
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Pulsar-Message-ID", fmt.Sprintf("%d:%d", ledger, entry))
	if md.Compression != nil {
		h.Set("X-Pulsar-compression", md.GetCompression().String())
	}
	if md.UncompressedSize != nil {
		h.Set("X-Pulsar-uncompressed-size", strconv.FormatUint(uint64(md.GetUncompressedSize()), 10))
	}
	return md, payload, true
}

// headerText is s as a real broker's web server (Jetty) writes a header value: in
// ISO-8859-1, a character up to U+00FF as one byte and any other, CR, LF and the bytes of
// invalid UTF-8 included, as a space; other control characters go as they are, so a key
// holding one gives an answer that a strict HTTP client refuses, as a real broker's does.
func headerText(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r == '\r' || r == '\n' || r > 0xff:
			b = append(b, ' ')
		default:
			b = append(b, byte(r)) //nolint:gosec // G115: r is at most 0xff here

		}
	}
	return string(b)
}
