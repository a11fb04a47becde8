package dlq_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

func TestSummarize(t *testing.T) {
	eachTarget(t, summarize)
}

// summarize: the seed's four copies (urnA failed, urnB unknown_urn, poison, raw) in four
// rows, the oldest and newest from failed_at or, for the raw copy, the publish time, and
// nothing changed on the broker.
func summarize(t *testing.T, f *fixture) {
	f.seed(t)
	before := f.state(t)
	sum, err := dlq.Summarize(t.Context(), f.admin, dlq.SummaryOptions{Topic: f.dlq})
	require.NoError(t, err)
	assert.Equal(t, 4, sum.Total)
	assert.ElementsMatch(t, []dlq.SummaryRow{
		{URN: urnA, Reason: envelope.ReasonFailed, Count: 1},
		{URN: urnB, Reason: envelope.ReasonUnknownURN, Count: 1},
		{URN: "", Reason: envelope.ReasonPoison, Count: 1},
		{URN: "", Reason: "", Count: 1},
	}, sum.Rows)
	// annotatedTmpl's failed_at is 2023; the poison copy's is when seed ran, and the raw
	// copy's publish time is then or later (the same millisecond, or the next ones).
	assert.Equal(t, dlq.Stamp{At: time.UnixMilli(1700000001000), Source: dlq.TimeFailedAt}, sum.Oldest)
	assert.Greater(t, sum.Newest.At.Year(), 2023, "the newest is the poison or the raw copy")
	assert.Equal(t, before, f.state(t), "no topic, subscription, backlog or consumer changed")

	n, err := f.admin.Backlog(t.Context(), f.dlq, dlq.DefaultSubscription)
	require.NoError(t, err)
	assert.Equal(t, int64(4), n)
	_, err = f.admin.Backlog(t.Context(), f.dlq, "other")
	require.ErrorIs(t, err, dlq.ErrSubscriptionNotFound)
	_, err = f.admin.Backlog(t.Context(), f.queue, dlq.DefaultSubscription)
	require.ErrorIs(t, err, dlq.ErrSubscriptionNotFound, "no such topic")
	_, err = dlq.Summarize(t.Context(), f.admin, dlq.SummaryOptions{Topic: f.queue})
	require.ErrorIs(t, err, dlq.ErrSubscriptionNotFound)
	assert.Equal(t, before, f.state(t), "nothing created")
}

// TestDeadLetteredAtNeedsAPositiveFailedAt: a dead_letter block without a failure time
// (failed_at 0) gives the publish time, as a raw copy does.
func TestDeadLetteredAtNeedsAPositiveFailedAt(t *testing.T) {
	t.Parallel()
	env, err := envelope.Decode([]byte(strings.Replace(string(annotated(urnA, "id-0", envelope.ReasonFailed)), `"failed_at":1700000001000`, `"failed_at":0`, 1)))
	require.NoError(t, err)
	require.NotNil(t, env.DeadLetter)
	m := dlq.Message{Envelope: env, PublishTime: time.UnixMilli(1700000002000)}
	at, source := m.DeadLetteredAt()
	assert.Equal(t, time.UnixMilli(1700000002000), at)
	assert.Equal(t, dlq.TimePublished, source)
}
