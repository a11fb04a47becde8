package pulsar

import (
	"errors"
	"strings"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/mock/gomock"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

var errElsewhere = errors.New("in flight elsewhere")

// A deferral on the last attempt is republished with the same count, never dead-lettered:
// the next delivery has the same attempt number.
func TestDeferIsRepublishedWithoutCountingAnAttempt(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(Defer(700*time.Millisecond, errElsewhere))),
		WithMaxAttempts(3), WithRetry(retry.Policy{Backoff: retry.Backoff{Initial: time.Hour}}))
	msg, _ := newMessage(t, testURN, 2, 0) // counted 3 of 3: a failure would be dead-lettered
	var pm *apulsar.ProducerMessage
	gomock.InOrder(
		h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)),
		h.settler.EXPECT().Ack(msg).Return(nil),
	)
	h.process(msg)
	require.NotNil(t, pm, "republished, not dead-lettered")
	assert.Equal(t, "2", pm.Properties[PropAttempts], "the deferral is not counted")
	assert.Equal(t, 700*time.Millisecond, pm.DeliverAfter)
	assert.Equal(t, "700", pm.Properties[PropDelay])
	env, err := envelope.Decode(pm.Payload)
	require.NoError(t, err)
	assert.Equal(t, 2, env.Attempts, "the body's attempts are not counted either")
	assert.NotContains(t, h.kinds(), EventDeadLettered)
	assert.Contains(t, h.kinds(), EventRetried)
}

// Under the nack strategy a deferral is a republish too: a negative ack would raise the
// redelivery count, and reconciliation counts it.
func TestDeferUnderNackIsARepublishThatKeepsTheCount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(Defer(0, errElsewhere))),
		WithRetry(retry.Policy{Strategy: retry.Nack, MaxAttempts: 3}))
	msg, _ := newMessage(t, testURN, 0, 2) // redelivered twice: counted 3 of 3
	var pm *apulsar.ProducerMessage
	gomock.InOrder(
		h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)),
		h.settler.EXPECT().Ack(msg).Return(nil),
	)
	h.process(msg)
	require.NotNil(t, pm)
	assert.Equal(t, "2", pm.Properties[PropAttempts], "the redelivery count moves into bq-attempts")
}

// Under the nack strategy, a failure of a message whose count rides in bq-attempts (a
// deferred copy) is republished with the count raised: a nack would leave it unchanged.
func TestNackStrategyRepublishesWhenANackWouldNotCount(t *testing.T) {
	t.Parallel()
	h := newHarness(t, Handle(testURN, handlerReturning(errors.New("later"))),
		WithRetry(retry.Policy{Strategy: retry.Nack, MaxAttempts: 5}))
	msg, _ := newMessage(t, testURN, 2, 0) // bq-attempts 2, redelivery count 0
	var pm *apulsar.ProducerMessage
	gomock.InOrder(
		h.senders[testParent].EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(capture(&pm)),
		h.settler.EXPECT().Ack(msg).Return(nil),
	)
	h.process(msg)
	require.NotNil(t, pm)
	assert.Equal(t, "3", pm.Properties[PropAttempts])

	// Where the redelivery count carries the count, it is a nack, as before.
	again, _ := newMessage(t, testURN, 0, 2)
	h.settler.EXPECT().Nack(again)
	h.process(again)
}

func TestAckWithWarningAcksReportsAndWarns(t *testing.T) {
	t.Parallel()
	uncommitted := errors.New("could not record the message as done")
	h := newHarness(t, Handle(testURN, handlerReturning(AckWithWarning(uncommitted))))
	msg, _ := newMessage(t, testURN, 0, 0)
	h.settler.EXPECT().Ack(msg).Return(nil)
	h.process(msg)
	errs := h.errors()
	require.Len(t, errs, 1, "the warning reaches the error hook, once")
	require.ErrorIs(t, errs[0], uncommitted)
	var we *directive
	require.ErrorAs(t, errs[0], &we)
	assert.True(t, we.warn, "the outcome is a warning, not a deferral")
	assert.Contains(t, h.kinds(), EventHandled)
	assert.NotContains(t, h.kinds(), EventFailed, "a warning is not a failure")
	hl := h.c.Health()
	assert.True(t, hl.Ready)
	assert.Contains(t, strings.Join(hl.Warnings, ";"), "could not record the message as done")
}

func TestDirectiveErrorTexts(t *testing.T) {
	t.Parallel()
	assert.Equal(t, "pulsar: deferred for 1s", Defer(time.Second, nil).Error())
	assert.Equal(t, "pulsar: deferred for 1s: in flight elsewhere", Defer(time.Second, errElsewhere).Error())
	require.ErrorIs(t, Defer(time.Second, errElsewhere), errElsewhere)
	assert.Equal(t, "pulsar: acknowledged with a warning", AckWithWarning(nil).Error())
	assert.Equal(t, "pulsar: acknowledged with a warning: in flight elsewhere", AckWithWarning(errElsewhere).Error())
	require.ErrorIs(t, AckWithWarning(errElsewhere), errElsewhere)
}
