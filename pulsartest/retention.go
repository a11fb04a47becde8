package pulsartest

import (
	"errors"
	"fmt"
	"time"
)

// Retention is a namespace retention policy: how much acknowledged data a trim keeps. Data that a durable
// subscription has not acknowledged is never trimmed, whatever the policy.
//
// As in Pulsar, the zero value keeps nothing (the default of a namespace without a policy), a negative limit is
// no limit (Pulsar's -1), and either both limits are zero or neither is: Retention{Time: time.Hour} is refused
// (ErrInvalidRetention); write Retention{Time: time.Hour, Size: -1} for a time limit alone.
//
// A trim takes the removable entries oldest first and removes each one that either limit lets go; it stops at
// the first entry that both limits keep. The limits apply to each partition of a partitioned topic on its own.
type Retention struct {
	// Time is the time limit: an entry goes once it is older than Time (measured from its arrival at the broker);
	// negative: no time limit. Pulsar's retentionTimeInMinutes.
	Time time.Duration
	// Size is the size limit: an entry goes if what would remain of the topic after it is still at least Size
	// bytes (entries as stored); negative: no size limit. Pulsar's retentionSizeInMB, in bytes.
	Size int64
}

// InfiniteRetention keeps every entry: no time and no size limit (Pulsar's -1 and -1).
var InfiniteRetention = Retention{Time: -1, Size: -1}

// ErrInvalidRetention is returned by Start for a retention policy that sets exactly one of its limits to zero.
var ErrInvalidRetention = errors.New("pulsartest: invalid retention policy")

func (r Retention) validate() error {
	if (r.Time == 0) != (r.Size == 0) {
		return fmt.Errorf("%w: time %v and size %d: either both limits are 0 (no retention) or neither is; "+
			"use a negative value to leave one limit out", ErrInvalidRetention, r.Time, r.Size)
	}
	return nil
}

// keeps reports whether the policy keeps an acknowledged entry that arrived at arrivedMs, when the topic holds
// total bytes and removing the entries before it and the entry itself would free freed bytes.
func (r Retention) keeps(nowMs, arrivedMs, total, freed int64) bool {
	expired := r.Time >= 0 && nowMs-arrivedMs > r.Time.Milliseconds()
	overSize := r.Size >= 0 && total-freed >= r.Size
	return !expired && !overSize
}

// WithRetention sets the retention policy of every namespace. Default: no retention (the zero Retention), as
// in Pulsar. It only matters when the broker trims: see Broker.Trim and WithTrimInterval.
func WithRetention(r Retention) Option { return func(o *options) { o.retention = r } }

// WithTrimInterval trims every topic (Broker.TrimAll) every interval of the broker's clock, as a real broker
// checks retention every retentionCheckIntervalInSeconds (120 s by default) and after ledger rollovers.
// Default: off (0), so that nothing disappears unless a test asks for it.
func WithTrimInterval(every time.Duration) Option {
	return func(o *options) { o.trimInterval = max(every, 0) }
}

// Trim removes from the topic (each partition of a partitioned topic) what Pulsar would delete when it trims
// its ledgers, and returns the number of entries removed:
//
//   - every entry that no durable subscription still needs, that is up to the oldest mark-delete position of
//     the durable subscriptions (individually acknowledged entries after it stay), and everything when the
//     topic has no durable subscription: entries written before any subscription existed go;
//   - minus what the retention policy (WithRetention) keeps.
//
// Non-durable subscriptions (readers) hold nothing back; they move past the removed entries. Afterwards a
// reader or a new subscription starting at Earliest starts at the first entry kept, GET_LAST_MESSAGE_ID answers
// with the last entry written while any entry is kept and with -1:-1 once none is (as Pulsar 4.0 does, so that a
// reader from Earliest has no next message: Reader.HasNext is false), backlogs count only entries kept, and
// message ids are never reused.
//
// The broker trims only when asked (Trim, TrimAll, WithTrimInterval). Pulsar deletes whole ledgers and never
// the one it is writing, so on a real broker removed entries can stay readable until the next ledger rollover;
// the embedded broker removes them entry by entry, as if each were a closed ledger of its own.
func (b *Broker) Trim(topicName string) int {
	n := 0
	for _, t := range b.topicsFor(topicName) {
		n += t.trim(b.opts.retention)
	}
	return n
}

// TrimAll trims every topic (see Trim) and returns the number of entries removed.
func (b *Broker) TrimAll() int {
	b.mu.Lock()
	ts := make([]*topic, 0, len(b.topics))
	for _, t := range b.topics {
		ts = append(ts, t)
	}
	b.mu.Unlock()
	n := 0
	for _, t := range ts {
		n += t.trim(b.opts.retention)
	}
	return n
}

// scheduleTrimLocked arms the WithTrimInterval timer; b.mu is held.
func (b *Broker) scheduleTrimLocked() {
	b.trimStop = b.opts.clock.AfterFunc(b.opts.trimInterval, func() {
		if !b.enter() {
			return
		}
		defer b.wg.Done()
		b.TrimAll()
		b.mu.Lock()
		defer b.mu.Unlock()
		b.life.RLock()
		closed := b.closed
		b.life.RUnlock()
		if !closed {
			b.scheduleTrimLocked()
		}
	})
}

// trim removes the entries no durable subscription needs and the policy does not keep, oldest first, and moves
// the cursors that were behind (non-durable ones) past them.
func (t *topic) trim(r Retention) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	upTo := t.next - 1
	for _, s := range t.subs {
		if s.durable {
			upTo = min(upTo, s.markDelete)
		}
	}
	now := t.now()
	n := 0
	var freed int64
	for n < len(t.entries) && t.entries[n].id <= upTo {
		e := t.entries[n]
		if r.keeps(now, e.brokerTime, t.size, freed+int64(len(e.raw))) {
			break
		}
		freed += int64(len(e.raw))
		n++
	}
	if n == 0 {
		return 0
	}
	clear(t.entries[:n])
	t.entries = t.entries[n:]
	t.first += int64(n)
	t.size -= freed
	for _, s := range t.subs {
		if s.markDelete < t.first-1 {
			s.ackUpTo(t.first - 1) // as Pulsar mark-deletes non-durable cursors over deleted ledgers
		}
	}
	return n
}
