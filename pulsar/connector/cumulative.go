package connector

import (
	"sync"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/seam"
)

// cumulativeConsumer is what cumulative settlement needs of the subscription.
type cumulativeConsumer interface {
	AckCumulative(msg apulsar.Message) error
	Nack(msg apulsar.Message)
}

// entryState is the settlement state of a received message under cumulative acks.
type entryState uint8

const (
	entryPending entryState = iota // delivered, not settled
	entrySettled                   // acked by its settlement (or republished/dead-lettered, then acked)
	entryRewound                   // nacked: the broker delivers it again; blocks until that copy settles
)

// msgKey identifies a message within its topic (partition).
type msgKey struct {
	ledger, entry int64
	batch         int32
	partition     int32
}

func keyOf(id apulsar.MessageID) msgKey {
	return msgKey{ledger: id.LedgerID(), entry: id.EntryID(), batch: id.BatchIdx(), partition: id.PartitionIdx()}
}

// after reports whether k is past o in the topic's order.
func (k msgKey) after(o msgKey) bool {
	if k.ledger != o.ledger {
		return k.ledger > o.ledger
	}
	if k.entry != o.entry {
		return k.entry > o.entry
	}
	return k.batch > o.batch
}

type ackEntry struct {
	key   msgKey
	msg   apulsar.Message
	state entryState
}

// ackLine is the delivery order of one topic (partition).
type ackLine struct {
	entries []*ackEntry // oldest first; the front is never settled after advance
	acked   msgKey      // the highest cumulatively acknowledged message
	hasAck  bool
}

// cumulativeSettler is the seam.Settler of a Source with ack-strategy=cumulative: it records the delivery order per topic (partition) and acknowledges
// cumulatively up to the last message of the settled prefix, so that no cumulative
// acknowledgement covers a message that may still be nacked. A nacked message makes the
// broker of an Exclusive or Failover subscription rewind (it delivers again every
// unacknowledged message after it): its entry stays in the line as a hole, taken over by
// its redelivered copy, and nothing after it is acknowledged until that copy is settled.
// Duplicates (messages delivered again by a rewind) are appended as new entries, which
// only holds the prefix back longer.
type cumulativeSettler struct {
	pc cumulativeConsumer

	mu    sync.Mutex
	lines map[string]*ackLine
}

var _ seam.Settler = (*cumulativeSettler)(nil)

func newCumulativeSettler(pc cumulativeConsumer) *cumulativeSettler {
	return &cumulativeSettler{pc: pc, lines: map[string]*ackLine{}}
}

func (c *cumulativeSettler) line(topic string) *ackLine {
	l := c.lines[topic]
	if l == nil {
		l = &ackLine{}
		c.lines[topic] = l
	}
	return l
}

// track records a received message, in delivery order. A redelivered copy of a nacked
// message takes over its hole.
func (c *cumulativeSettler) track(msg apulsar.Message) {
	k := keyOf(msg.ID())
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.line(msg.Topic())
	if l.covered(k) {
		return // a duplicate of an acknowledged message: its settlement changes nothing
	}
	for _, e := range l.entries {
		if e.state == entryRewound && e.key == k {
			e.msg, e.state = msg, entryPending
			return
		}
	}
	l.entries = append(l.entries, &ackEntry{key: k, msg: msg})
}

// covered reports whether a cumulative acknowledgement already covers k.
func (l *ackLine) covered(k msgKey) bool { return l.hasAck && !k.after(l.acked) }

// find returns the oldest entry of msg in state st, or nil.
func (l *ackLine) find(k msgKey, st entryState) *ackEntry {
	for _, e := range l.entries {
		if e.key == k && e.state == st {
			return e
		}
	}
	return nil
}

// Ack settles msg and acknowledges cumulatively the settled prefix of its line, if it
// grew past the last acknowledgement. The error is the client's AckCumulative error.
func (c *cumulativeSettler) Ack(msg apulsar.Message) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.line(msg.Topic())
	if e := l.find(keyOf(msg.ID()), entryPending); e != nil {
		e.state = entrySettled
	}
	return c.advance(l)
}

// advance drops the settled prefix of l and acknowledges cumulatively its last message
// when that is past the last acknowledgement. Called with c.mu held, so that cumulative
// acknowledgements leave in increasing order.
func (c *cumulativeSettler) advance(l *ackLine) error {
	var target *ackEntry
	n := 0
	for n < len(l.entries) && l.entries[n].state == entrySettled {
		if !l.covered(l.entries[n].key) {
			target = l.entries[n]
		}
		n++
	}
	clear(l.entries[:n])
	l.entries = l.entries[n:]
	if target == nil {
		return nil
	}
	if err := c.pc.AckCumulative(target.msg); err != nil {
		return err
	}
	l.acked, l.hasAck = target.key, true
	return nil
}

// Nack negatively acknowledges msg: its entry becomes a hole until the redelivered copy
// is settled. A copy of a message an acknowledgement already covers is never delivered
// again, so it counts as settled instead.
func (c *cumulativeSettler) Nack(msg apulsar.Message) {
	k := keyOf(msg.ID())
	c.mu.Lock()
	l := c.line(msg.Topic())
	if e := l.find(k, entryPending); e != nil {
		if l.covered(k) {
			e.state = entrySettled
			_ = c.advance(l) // a failed cumulative acknowledgement is repeated by the next one
		} else {
			e.state = entryRewound
		}
	}
	c.mu.Unlock()
	c.pc.Nack(msg)
}
