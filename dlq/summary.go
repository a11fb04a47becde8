package dlq

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
)

// Where a dead letter's time ([Message.DeadLetteredAt]) was read from.
const (
	// TimeFailedAt is dead_letter.failed_at, the time the consumer dead-lettered it.
	TimeFailedAt = "failed_at"
	// TimePublished is its publish time on the dead-letter topic, for a copy without a
	// dead_letter block (a raw copy) or with no positive failed_at.
	TimePublished = "publish_time"
)

// DeadLetteredAt returns when m was dead-lettered and where that was read from: the
// dead_letter block's failed_at ([TimeFailedAt]) when m has a block with a positive time
// (annotated and poison copies), else its publish time on the dead-letter topic
// ([TimePublished]).
func (m Message) DeadLetteredAt() (at time.Time, source string) {
	if m.Envelope != nil && m.Envelope.DeadLetter != nil && m.Envelope.DeadLetter.FailedAt > 0 {
		return time.UnixMilli(m.Envelope.DeadLetter.FailedAt), TimeFailedAt
	}
	return m.PublishTime, TimePublished
}

// SummaryOptions configures [Summarize].
type SummaryOptions struct {
	// Topic is the dead-letter topic. Required.
	Topic string
	// Subscription is the retention subscription whose pending messages are counted.
	// Default (""): [DefaultSubscription].
	Subscription string
}

// Summary counts the dead letters pending on a retention subscription.
type Summary struct {
	// Total is the number of pending dead letters.
	Total int
	// Rows count them by URN and reason, the largest count first, then by URN and reason.
	Rows []SummaryRow
	// Oldest and Newest are the earliest and the latest [Message.DeadLetteredAt]; zero when
	// Total is 0.
	Oldest, Newest Stamp
}

// SummaryRow is the number of pending dead letters with one URN and one reason.
type SummaryRow struct {
	// URN is the routing URN ([Message.RoutingURN]); for a poison or raw copy, which has
	// none, a usable (present, not blank) bq-job property the copy kept from the original
	// message, else "".
	URN string
	// Reason is dead_letter.reason, "" for a raw copy (no dead_letter block).
	Reason envelope.Reason
	// Count is how many there are.
	Count int
}

// Stamp is a dead letter's time and where it was read from ([TimeFailedAt] or
// [TimePublished]).
type Stamp struct {
	At     time.Time
	Source string
}

// Summarize counts the dead letters pending on the retention subscription of a dead-letter
// topic by URN and reason, and finds the oldest and the newest. It reads them all the way
// [Peek] does, so it is strictly read-only (no subscription created, nothing acknowledged,
// no cursor moved), and returns the same errors.
func Summarize(ctx context.Context, admin *Admin, opts SummaryOptions) (Summary, error) {
	if admin == nil {
		return Summary{}, fmt.Errorf("%w: nil admin", ErrInvalidOptions)
	}
	if err := ValidateTopic(opts.Topic); err != nil {
		return Summary{}, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	sub := opts.Subscription
	if sub == "" {
		sub = DefaultSubscription
	}
	if err := ValidateSubscriptionName(sub); err != nil {
		return Summary{}, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	var c counter
	if err := admin.pending(ctx, opts.Topic, sub, func(m Message) bool { c.add(m); return true }); err != nil {
		return Summary{}, err
	}
	return c.summary(), nil
}

type rowKey struct {
	urn    string
	reason envelope.Reason
}

// counter accumulates a Summary.
type counter struct {
	total          int
	counts         map[rowKey]int
	oldest, newest Stamp
}

func (c *counter) add(m Message) {
	urn := m.RoutingURN
	if urn == "" {
		if pj, ok := binding.RoutedJob(m.Properties); ok {
			urn = pj
		}
	}
	if c.counts == nil {
		c.counts = map[rowKey]int{}
	}
	c.counts[rowKey{urn, m.Reason}]++
	at, src := m.DeadLetteredAt()
	s := Stamp{At: at, Source: src}
	if c.total == 0 || at.Before(c.oldest.At) {
		c.oldest = s
	}
	if c.total == 0 || at.After(c.newest.At) {
		c.newest = s
	}
	c.total++
}

func (c *counter) summary() Summary {
	s := Summary{Total: c.total, Oldest: c.oldest, Newest: c.newest}
	for k, n := range c.counts {
		s.Rows = append(s.Rows, SummaryRow{URN: k.urn, Reason: k.reason, Count: n})
	}
	slices.SortFunc(s.Rows, func(a, b SummaryRow) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.URN, b.URN), cmp.Compare(a.Reason, b.Reason))
	})
	return s
}
