package dlq

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/binding"
)

// summaryOf counts seven classified copies without a broker: three urn:a failed, two urn:b
// unknown_urn (one routed by bq-job), a poison copy whose bq-job names urn:p, and a raw
// copy whose publish time is the newest.
func summaryOf(t *testing.T) Summary {
	t.Helper()
	dead := func(urn string, reason envelope.Reason, at int64) []byte {
		env, err := envelope.Make(urn, map[string]any{"n": 1})
		require.NoError(t, err)
		b, err := env.ToDeadLetter(envelope.DeadLetterInfo{Reason: reason, FailedAt: time.UnixMilli(at)}).Encode()
		require.NoError(t, err)
		return b
	}
	poison, err := envelope.PoisonCopy([]byte("{"), envelope.DeadLetterInfo{Cause: errors.New("x"), FailedAt: time.UnixMilli(5000)})
	require.NoError(t, err)
	msgs := []Message{
		{Payload: dead("urn:a", envelope.ReasonFailed, 3000)},
		{Payload: dead("urn:a", envelope.ReasonFailed, 1000)},
		{Payload: dead("urn:a", envelope.ReasonFailed, 2000)},
		{Payload: dead("urn:b", envelope.ReasonUnknownURN, 4000)},
		{Payload: dead("urn:other", envelope.ReasonUnknownURN, 4000), Properties: map[string]string{binding.Job: "urn:b"}},
		{Payload: poison, Properties: map[string]string{binding.Job: "urn:p"}, PublishTime: time.UnixMilli(8000)},
		{Payload: []byte(`{"job":"urn:x"}`), Properties: map[string]string{binding.Job: " "}, PublishTime: time.UnixMilli(9000)},
	}
	var c counter
	for _, m := range msgs {
		c.add(classified(m))
	}
	return c.summary()
}

func TestRowsAndTimesOfSummarize(t *testing.T) {
	t.Parallel()
	sum := summaryOf(t)
	assert.Equal(t, 7, sum.Total)
	assert.Equal(t, []SummaryRow{
		{URN: "urn:a", Reason: envelope.ReasonFailed, Count: 3},
		{URN: "urn:b", Reason: envelope.ReasonUnknownURN, Count: 2},
		{URN: "", Reason: "", Count: 1},
		{URN: "urn:p", Reason: envelope.ReasonPoison, Count: 1},
	}, sum.Rows, "by count, then URN, then reason; a poison copy's bq-job names its URN")
	assert.Equal(t, Stamp{At: time.UnixMilli(1000), Source: TimeFailedAt}, sum.Oldest)
	assert.Equal(t, Stamp{At: time.UnixMilli(9000), Source: TimePublished}, sum.Newest)
}

// TestOldestAndNewestWhateverTheOrder: the newest is the latest time read, not the last
// message, and the oldest the earliest, not the first.
func TestOldestAndNewestWhateverTheOrder(t *testing.T) {
	t.Parallel()
	var c counter
	for _, at := range []int64{2000, 3000, 1000, 2500} {
		c.add(classified(Message{Payload: []byte("raw"), PublishTime: time.UnixMilli(at)}))
	}
	sum := c.summary()
	assert.Equal(t, Stamp{At: time.UnixMilli(1000), Source: TimePublished}, sum.Oldest)
	assert.Equal(t, Stamp{At: time.UnixMilli(3000), Source: TimePublished}, sum.Newest)
}

func TestParseBacklog(t *testing.T) {
	t.Parallel()
	n, found, err := parseBacklog([]byte(`{"subscriptions":{"bq-dlq":{"msgBacklog":7},"x":{"msgBacklog":1}}}`), "bq-dlq")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, int64(7), n)
	n, found, err = parseBacklog([]byte(`{"subscriptions":{"bq-dlq":{"msgBacklog":0}}}`), "bq-dlq")
	require.NoError(t, err, "a subscription read to its end")
	assert.True(t, found)
	assert.Zero(t, n)
	_, found, err = parseBacklog([]byte(`{"subscriptions":{}}`), "bq-dlq")
	require.NoError(t, err)
	assert.False(t, found)
	for _, bad := range []string{`{`, `{"subscriptions":{"bq-dlq":{}}}`, `{"subscriptions":{"bq-dlq":{"msgBacklog":-1}}}`, `{"subscriptions":[]}`} {
		_, _, err = parseBacklog([]byte(bad), "bq-dlq")
		require.Error(t, err, bad)
	}
}

// FuzzParseBacklog feeds arbitrary topic stats answers to the parser: it returns a
// backlog that is never negative, or an error, and never panics.
func FuzzParseBacklog(f *testing.F) {
	f.Add([]byte(`{"subscriptions":{"bq-dlq":{"msgBacklog":7}}}`), "bq-dlq")
	f.Add([]byte(`{"subscriptions":{"bq-dlq":{"msgBacklog":-3}}}`), "bq-dlq")
	f.Add([]byte(`{"subscriptions":null}`), "")
	f.Add([]byte(`[]`), "x")
	f.Fuzz(func(t *testing.T, body []byte, sub string) {
		n, found, err := parseBacklog(body, sub)
		if err == nil && (n < 0 || (!found && n != 0)) {
			t.Fatalf("backlog %d, found %v", n, found)
		}
	})
}
