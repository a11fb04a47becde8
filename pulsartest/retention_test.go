package pulsartest_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/testwait"
	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest"
)

// retentionSetup starts a broker with opts, a client and a producer without batching on a fresh topic.
func retentionSetup(t *testing.T, opts ...pulsartest.Option) (*pulsartest.Broker, apulsar.Client, apulsar.Producer, string) {
	t.Helper()
	b := pulsartest.NewBroker(t, opts...)
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	p := newProducer(t, c, apulsar.ProducerOptions{Topic: topic, DisableBatching: true})
	return b, c, p, topic
}

func durable(t *testing.T, c apulsar.Client, topic, name string) apulsar.Consumer {
	t.Helper()
	return subscribe(t, c, apulsar.ConsumerOptions{
		Topic: topic, SubscriptionName: name, AckWithResponse: true,
		SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
	})
}

func ackAll(t *testing.T, k apulsar.Consumer, ms []apulsar.Message) {
	t.Helper()
	for _, m := range ms {
		require.NoError(t, k.Ack(m))
	}
}

func lastID(t *testing.T, k apulsar.Consumer) apulsar.MessageID {
	t.Helper()
	ids, err := k.GetLastMessageIDs()
	require.NoError(t, err)
	require.Len(t, ids, 1)
	return ids[0]
}

func TestTrimTopicWithoutSubscriptionsLosesEverything(t *testing.T) {
	t.Parallel()
	b, c, p, topic := retentionSetup(t)
	ids := sendAll(t, p, numbered(3)...)
	require.Equal(t, 3, b.Stats(topic).Entries, "nothing goes before a trim: the broker trims only when asked")
	assert.Equal(t, 3, b.Trim(topic))
	st := b.Stats(topic)
	assert.Zero(t, st.Entries)
	assert.Zero(t, st.StorageSize)
	assert.Zero(t, b.Trim(topic), "a second trim has nothing left")

	k := durable(t, c, topic, "late")
	assert.Equal(t, int64(-1), lastID(t, k).EntryID(), "GET_LAST_MESSAGE_ID answers -1:-1 once nothing is kept")
	assert.Zero(t, b.Backlog(topic, "late"))
	next := sendAll(t, p, "after")
	assert.Greater(t, next[0].EntryID(), ids[2].EntryID(), "message ids are never reused")
	assert.Equal(t, "after", string(receive(t, k).Payload()), "a new subscription at Earliest starts after the removed entries")
}

func TestTrimRemovesWhatEveryDurableSubscriptionAcked(t *testing.T) {
	t.Parallel()
	b, c, p, topic := retentionSetup(t)
	fast, slow := durable(t, c, topic, "fast"), durable(t, c, topic, "slow")
	sendAll(t, p, numbered(4)...)
	ackAll(t, fast, receiveN(t, fast, 4))
	ms := receiveN(t, slow, 4)
	ackAll(t, slow, ms[:2])
	require.NoError(t, slow.Ack(ms[3])) // individually acked after a hole: mark-delete stays at m-1

	assert.Equal(t, 2, b.Trim(topic), "m-2 is still pending on slow, so m-2 and m-3 stay")
	assert.Equal(t, 2, b.Stats(topic).Entries)
	assert.Equal(t, 1, b.Backlog(topic, "slow"))
	assert.Zero(t, b.Backlog(topic, "fast"))

	late := durable(t, c, topic, "late")
	got := receiveN(t, late, 2)
	assert.Equal(t, []string{"m-2", "m-3"}, payloads(got), "Earliest is the first entry kept")
	ackAll(t, late, got)

	require.NoError(t, slow.Ack(ms[2]))
	assert.Equal(t, 2, b.Trim(topic), "acknowledged by every durable subscription")
	assert.Zero(t, b.Stats(topic).Entries)
}

func TestTrimReaderDoesNotProtectEntries(t *testing.T) {
	t.Parallel()
	b, c, p, topic := retentionSetup(t)
	k := durable(t, c, topic, "s")
	sendAll(t, p, numbered(3)...)
	ackAll(t, k, receiveN(t, k, 3))

	b.PauseDispatch(topic) // the reader gets nothing before the trim
	r, err := c.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	require.NoError(t, err)
	defer r.Close()
	testwait.Eventually(t, eventuallyWithin, func() bool { return len(b.Subscriptions(topic)) == 2 }, "the reader's subscription")
	var reader string
	for _, s := range b.Subscriptions(topic) {
		if s != "s" {
			reader = s
		}
	}
	require.Equal(t, 3, b.Backlog(topic, reader))

	assert.Equal(t, 3, b.Trim(topic), "the reader has read nothing, yet it keeps nothing")
	assert.Zero(t, b.Backlog(topic, reader), "the reader moved past the removed entries")
	b.ResumeDispatch(topic)
	sendAll(t, p, "after")
	assert.Equal(t, "after", readNext(t, r))
	assert.False(t, r.HasNext())

	r2, err := c.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	require.NoError(t, err)
	defer r2.Close()
	assert.Equal(t, "after", readNext(t, r2), "a reader at Earliest starts after the removed entries")
}

func TestTrimWithoutSubscriptionAlsoIgnoresReaders(t *testing.T) {
	t.Parallel()
	b, c, p, topic := retentionSetup(t)
	sendAll(t, p, numbered(2)...)
	b.PauseDispatch(topic)
	r, err := c.CreateReader(apulsar.ReaderOptions{Topic: topic, StartMessageID: apulsar.EarliestMessageID()})
	require.NoError(t, err)
	defer r.Close()
	testwait.Eventually(t, eventuallyWithin, func() bool { return len(b.Subscriptions(topic)) == 1 }, "the reader's subscription")
	assert.Equal(t, 2, b.Trim(topic))
	b.ResumeDispatch(topic)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	_, err = r.Next(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "nothing left to read")
}

func TestTrimPartitionsOnTheirOwn(t *testing.T) {
	t.Parallel()
	tg := newEmbedded(t)
	b := tg.Broker()
	c := newClient(t, b.URL())
	topic := uniqueName(t, "t")
	tg.CreatePartitionedTopic(t, topic, 2)
	k := durable(t, c, topic, "s")
	for i := range 2 {
		pp := newProducer(t, c, apulsar.ProducerOptions{Topic: topic + "-partition-" + strconv.Itoa(i), DisableBatching: true})
		sendAll(t, pp, "a", "b")
	}
	for _, m := range receiveN(t, k, 4) {
		if m.ID().PartitionIdx() == 0 {
			require.NoError(t, k.Ack(m))
		}
	}
	assert.Equal(t, 2, b.Trim(topic))
	assert.Zero(t, b.Stats(topic+"-partition-0").Entries)
	assert.Equal(t, 2, b.Stats(topic+"-partition-1").Entries)
	assert.Equal(t, 2, b.Backlog(topic, "s"))
}

func TestRetentionInfiniteKeepsEverything(t *testing.T) {
	t.Parallel()
	b, c, p, topic := retentionSetup(t, pulsartest.WithRetention(pulsartest.InfiniteRetention))
	sendAll(t, p, numbered(3)...)
	assert.Zero(t, b.Trim(topic), "no subscription, yet retention keeps it")
	k := durable(t, c, topic, "s")
	ackAll(t, k, receiveN(t, k, 3))
	assert.Zero(t, b.Trim(topic), "acknowledged, yet retention keeps it")
	assert.Zero(t, b.TrimAll())
	assert.Equal(t, 3, b.Stats(topic).Entries)
	late := durable(t, c, topic, "late")
	assert.Equal(t, numbered(3), payloads(receiveN(t, late, 3)))
}

func TestRetentionTimeKeepsYoungEntries(t *testing.T) {
	t.Parallel()
	clock := pulsartest.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b, c, p, topic := retentionSetup(t, pulsartest.WithClock(clock),
		pulsartest.WithRetention(pulsartest.Retention{Time: time.Minute, Size: -1}))
	sendAll(t, p, "old-0", "old-1")
	clock.Advance(30 * time.Second)
	sendAll(t, p, "young")
	clock.Advance(30 * time.Second)
	assert.Zero(t, b.Trim(topic), "exactly one minute is not older than one minute")
	clock.Advance(time.Millisecond)
	assert.Equal(t, 2, b.Trim(topic))

	k := durable(t, c, topic, "s")
	m := receive(t, k)
	assert.Equal(t, "young", string(m.Payload()))
	clock.Advance(time.Hour)
	assert.Zero(t, b.Trim(topic), "expired, but not acknowledged by s")
	require.NoError(t, k.Ack(m))
	assert.Equal(t, 1, b.Trim(topic))
}

func TestRetentionSizeKeepsTheNewestBytes(t *testing.T) {
	t.Parallel()
	b, _, p, topic := retentionSetup(t)
	sendAll(t, p, "m-0", "m-1", "m-2", "m-3")
	size := b.Stats(topic).StorageSize
	require.Zero(t, size%4, "four entries of the same size")
	entry := int64(size / 4)

	b2, c2, p2, topic2 := retentionSetup(t, pulsartest.WithRetention(pulsartest.Retention{Time: -1, Size: 2 * entry}))
	sendAll(t, p2, "m-0", "m-1", "m-2", "m-3")
	require.Equal(t, size, b2.Stats(topic2).StorageSize)
	assert.Equal(t, 2, b2.Trim(topic2), "removing a third entry would leave less than the limit")
	assert.Equal(t, 2*int(entry), b2.Stats(topic2).StorageSize)
	k := durable(t, c2, topic2, "s")
	assert.Equal(t, []string{"m-2", "m-3"}, payloads(receiveN(t, k, 2)))
}

func TestRetentionTimeAndSizeEitherLimitRemoves(t *testing.T) {
	t.Parallel()
	clock := pulsartest.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	b, _, p, topic := retentionSetup(t, pulsartest.WithClock(clock),
		pulsartest.WithRetention(pulsartest.Retention{Time: time.Minute, Size: 1 << 20}))
	sendAll(t, p, "a", "b")
	assert.Zero(t, b.Trim(topic), "young and well under the size limit")
	clock.Advance(2 * time.Minute)
	assert.Equal(t, 2, b.Trim(topic), "the time limit alone removes them")
}

func TestRetentionRejectsASingleZeroLimit(t *testing.T) {
	t.Parallel()
	for _, r := range []pulsartest.Retention{{Time: time.Hour}, {Size: 1024}, {Time: -1}, {Size: -1}} {
		b, err := pulsartest.Start(t.Context(), pulsartest.WithRetention(r))
		require.ErrorIs(t, err, pulsartest.ErrInvalidRetention, "%+v", r)
		assert.Nil(t, b)
	}
	for _, r := range []pulsartest.Retention{{}, pulsartest.InfiniteRetention, {Time: time.Hour, Size: -1}, {Time: -1, Size: 1}} {
		b, err := pulsartest.Start(t.Context(), pulsartest.WithRetention(r))
		require.NoError(t, err, "%+v", r)
		require.NoError(t, b.Close())
	}
}

func TestTrimIntervalTrimsOnTheClock(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := pulsartest.NewManualClock(start)
	b, _, p, topic := retentionSetup(t, pulsartest.WithClock(clock), pulsartest.WithTrimInterval(time.Minute))
	sendAll(t, p, numbered(3)...)
	clock.Advance(59 * time.Second)
	assert.Equal(t, 3, b.Stats(topic).Entries)
	clock.Advance(time.Second)
	assert.Zero(t, b.Stats(topic).Entries, "trimmed when the interval passed")
	sendAll(t, p, "again")
	clock.Advance(time.Minute)
	assert.Zero(t, b.Stats(topic).Entries, "and again every interval")

	off := pulsartest.NewManualClock(start)
	b2, _, p2, topic2 := retentionSetup(t, pulsartest.WithClock(off))
	sendAll(t, p2, numbered(3)...)
	off.Advance(24 * time.Hour)
	assert.Equal(t, 3, b2.Stats(topic2).Entries, "without the option nothing is ever trimmed")
}
