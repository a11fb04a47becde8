package pulsartest

import (
	"strconv"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// producerAccess is a topic's exclusive-producer state, kept like Apache Pulsar's AbstractTopic: whether an
// exclusive producer holds the topic, the WaitForExclusive producers queued behind it and the topic epoch,
// which every new exclusive owner increments and which fences producers of an older epoch.
type producerAccess struct {
	hasExclusive  bool
	exclusiveName string
	waiting       []*producer // WaitForExclusive producers, in arrival order
	epoch         int64       // valid when hasEpoch
	hasEpoch      bool
}

// addResult is the outcome of topic.addProducer.
type addResult struct {
	code  ServerError // with msg: the PRODUCER is refused
	msg   string
	ready bool       // false and no msg: queued (WaitForExclusive)
	epoch *uint64    // topic epoch to report in PRODUCER_SUCCESS
	outs  []outbound // CLOSE_PRODUCER and ERROR frames for fenced producers
}

// epochOf returns the topic epoch to report, if the topic has one.
func (a *producerAccess) epochOf() *uint64 {
	if !a.hasEpoch {
		return nil
	}
	return ptr(uint64(a.epoch)) //nolint:gosec // epochs start at 0
}

// takeExclusive makes p the exclusive producer. A producer that brings a topic epoch (a reconnect) keeps it;
// a new one increments the topic epoch (the first is 0).
func (a *producerAccess) takeExclusive(p *producer) {
	a.hasExclusive, a.exclusiveName = true, p.name
	switch {
	case p.topicEpoch != nil:
		a.epoch = int64(*p.topicEpoch) //nolint:gosec // small
	case a.hasEpoch:
		a.epoch++
	default:
		a.epoch = 0
	}
	a.hasEpoch = true
}

// stale reports whether p reconnects with an epoch older than the topic's: another exclusive producer owned
// the topic in between, so p is fenced.
func (a *producerAccess) stale(p *producer) bool {
	return p.topicEpoch != nil && a.hasEpoch && int64(*p.topicEpoch) < a.epoch //nolint:gosec // small
}

func (a *producerAccess) staleMsg(p *producer) string {
	return "Topic epoch has already moved. Current epoch: " + strconv.FormatInt(a.epoch, 10) +
		", Producer epoch: " + strconv.FormatUint(*p.topicEpoch, 10)
}

// brokerException is how Pulsar 4.0 words a refused PRODUCER: the broker's exception class, then its message
// (org.apache.pulsar.broker.service.BrokerServiceException$ProducerFencedException: Fenced out).
func brokerException(class, msg string) string {
	return "org.apache.pulsar.broker.service.BrokerServiceException$" + class + ": " + msg
}

// addProducer registers p according to its access mode, with Apache Pulsar's rules and error codes:
//
//   - Shared: refused with ProducerBusy while an exclusive producer holds the topic or one waits for it.
//   - Exclusive: refused with ProducerFenced while an exclusive producer holds the topic or one waits for it,
//     while any Shared producer is connected, or when p reconnects with an older topic epoch.
//   - WaitForExclusive: queued (PRODUCER_SUCCESS with producer_ready=false) while any producer is connected;
//     it gets a second PRODUCER_SUCCESS when the exclusive producer ahead of it leaves.
//   - ExclusiveWithFencing: removes every connected producer (without CLOSE_PRODUCER, see fenceLocked) and
//     fails every waiting one with ProducerFenced, then takes the topic, unless p itself reconnects with an
//     older epoch.
//
// A producer name already connected on a live connection is refused with ProducerBusy.
func (t *topic) addProducer(p *producer, mode wire.ProducerAccessMode, initialSub string) addResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	var outs []outbound
	for other := range t.producers {
		if other.c.isClosed() {
			// The connection is gone and its teardown has not run yet: the client is already back, as on a
			// real broker, which replaces producers of inactive connections.
			outs = t.removeProducerLocked(other, outs)
		}
	}
	for other := range t.producers {
		if other.name == p.name {
			return addResult{
				code: ProducerBusy, outs: outs,
				msg: brokerException("NamingException",
					"Producer with name '"+p.name+"' is already connected to topic '"+t.name+"'"),
			}
		}
	}
	if t.terminated.Load() {
		return addResult{code: TopicTerminatedError, msg: brokerException("TopicTerminatedException", "Topic was already terminated"), outs: outs}
	}
	if code, msg, refused := t.quotaRefusalLocked(); refused {
		return addResult{code: code, msg: msg, outs: outs}
	}
	a := &t.access
	p.exclusive = mode != wire.ProducerAccessMode_Shared
	busyExclusive := "Topic has an existing exclusive producer: " + a.exclusiveName
	fenced := func(msg string) addResult {
		return addResult{code: ProducerFenced, msg: brokerException("ProducerFencedException", msg), outs: outs}
	}
	switch mode {
	case wire.ProducerAccessMode_Shared:
		if a.hasExclusive || len(a.waiting) > 0 {
			return addResult{code: ProducerBusy, msg: brokerException("ProducerBusyException", busyExclusive), outs: outs}
		}
	case wire.ProducerAccessMode_Exclusive:
		switch {
		case a.hasExclusive || len(a.waiting) > 0:
			return fenced(busyExclusive)
		case len(t.producers) > 0:
			return fenced("Topic has existing shared producers")
		case a.stale(p):
			return fenced(a.staleMsg(p))
		}
		a.takeExclusive(p)
	case wire.ProducerAccessMode_WaitForExclusive:
		switch {
		case a.hasExclusive || len(t.producers) > 0:
			a.waiting = append(a.waiting, p)
			return addResult{epoch: a.epochOf(), outs: outs}
		case a.stale(p):
			return fenced(a.staleMsg(p))
		}
		a.takeExclusive(p)
	case wire.ProducerAccessMode_ExclusiveWithFencing:
		if a.hasExclusive || len(t.producers) > 0 {
			outs = t.fenceLocked(outs)
		}
		if a.stale(p) {
			a.hasExclusive = false
			return fenced(a.staleMsg(p))
		}
		a.takeExclusive(p)
	default:
		return addResult{code: UnknownError, msg: "Invalid producer access mode: " + mode.String(), outs: outs}
	}
	if initialSub != "" {
		if _, ok := t.subs[initialSub]; !ok {
			t.subs[initialSub] = t.newSubscription(initialSub, true, wire.CommandSubscribe_Shared, nil)
			t.subs[initialSub].setPosition(t.first)
		}
	}
	t.producers[p] = struct{}{}
	return addResult{ready: true, epoch: a.epochOf(), outs: outs}
}

// fenceLocked fails every waiting producer with ProducerFenced and removes every connected one, for an
// ExclusiveWithFencing producer taking the topic. As Apache Pulsar 4.0 does (AbstractTopic closes them without a
// word to the client), a fenced producer is not sent CLOSE_PRODUCER: its client learns on its next SEND, which
// closes the connection (a SEND for an unregistered producer), and its reconnect is refused with ProducerFenced.
func (t *topic) fenceLocked(outs []outbound) []outbound {
	waiting := t.access.waiting
	t.access.waiting = nil
	for _, w := range waiting {
		w.c.forgetProducer(w)
		outs = append(outs,
			outbound{w.c, w.c.encode(errorCmd(w.reqID, ProducerFenced, "%s", brokerException("ProducerFencedException", "Fenced out")))})
	}
	for other := range t.producers {
		other.c.forgetProducer(other)
		outs = t.removeProducerLocked(other, outs)
	}
	return outs
}

func (t *topic) removeProducer(p *producer) {
	t.mu.Lock()
	outs := t.removeProducerLocked(p, nil)
	t.mu.Unlock()
	send(outs)
}

// removeProducerLocked detaches p, connected or waiting. When the topic had an exclusive producer, the first
// waiting producer takes the topic (as in Pulsar, waiting producers move up only when an exclusive producer
// leaves, not when the last Shared one does).
func (t *topic) removeProducerLocked(p *producer, outs []outbound) []outbound {
	a := &t.access
	for i, w := range a.waiting {
		if w == p {
			a.waiting = append(a.waiting[:i:i], a.waiting[i+1:]...)
			return outs
		}
	}
	if _, ok := t.producers[p]; !ok {
		return outs
	}
	delete(t.producers, p)
	if !a.hasExclusive {
		return outs
	}
	a.hasExclusive, a.exclusiveName = false, ""
	for len(a.waiting) > 0 {
		w := a.waiting[0]
		a.waiting = a.waiting[1:]
		if w.c.isClosed() {
			continue
		}
		a.takeExclusive(w)
		t.producers[w] = struct{}{}
		outs = append(outs, outbound{w.c, w.c.encode(producerSuccessCmd(w.reqID, w.name, w.schemaVersion, true, a.epochOf()))})
		break
	}
	return outs
}

// unloadAccessLocked closes the waiting producers of an unloaded topic; the topic epoch survives (Pulsar
// keeps it in the ledger's properties), the exclusive ownership does not.
func (t *topic) unloadAccessLocked(outs []outbound) []outbound {
	for _, w := range t.access.waiting {
		outs = append(outs, w.c.closeProducer(w))
	}
	t.access.waiting = nil
	t.access.hasExclusive, t.access.exclusiveName = false, ""
	return outs
}

func closeProducerCmd(id uint64) *wire.BaseCommand {
	return &wire.BaseCommand{
		Type:          cmdType(wire.BaseCommand_CLOSE_PRODUCER),
		CloseProducer: &wire.CommandCloseProducer{ProducerId: ptr(id), RequestId: ptr(uint64(0))},
	}
}

// forgetProducer drops p from the connection's producer table (the broker closed it).
func (c *conn) forgetProducer(p *producer) {
	c.mu.Lock()
	if c.producers[p.id] == p {
		delete(c.producers, p.id)
	}
	c.mu.Unlock()
}

// recentlyClosedFor is how long a SEND for a producer that the broker closed is dropped rather
// than answered by closing the connection: Apache Pulsar's ServerCnx keeps such ids for
// keepAliveIntervalSeconds, 30 s by default.
const recentlyClosedFor = 30 * time.Second

// closeProducer is the broker closing p on its own (termination, unload, backlog quota): p leaves
// the connection's table, its id is kept for recentlyClosedFor, and the CLOSE_PRODUCER to send
// is returned. Without the id kept, a SEND the client wrote before it read the CLOSE_PRODUCER
// closed the whole connection, where Apache Pulsar ignores it.
func (c *conn) closeProducer(p *producer) outbound {
	now := c.b.opts.clock.Now()
	c.mu.Lock()
	if c.producers[p.id] == p {
		delete(c.producers, p.id)
	}
	for id, at := range c.closedAt {
		if now.Sub(at) >= recentlyClosedFor {
			delete(c.closedAt, id)
		}
	}
	c.closedAt[p.id] = now
	c.mu.Unlock()
	return outbound{c, c.encode(closeProducerCmd(p.id))}
}

// recentlyClosed reports whether the broker closed producer id on this connection within
// recentlyClosedFor.
func (c *conn) recentlyClosed(id uint64) bool {
	now := c.b.opts.clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.closedAt[id]
	return ok && now.Sub(at) < recentlyClosedFor
}
