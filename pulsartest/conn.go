package pulsartest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// conn is one client connection: one reader goroutine handles commands in arrival order, one writer goroutine
// drains an unbounded queue, so enqueueing never blocks and no lock is held while writing to the socket.
type conn struct {
	b   *Broker
	nc  net.Conn
	id  uint64
	log *slog.Logger

	outMu  sync.Mutex
	out    [][]byte
	outSig chan struct{}
	done   chan struct{}
	once   sync.Once

	mu        sync.Mutex // leaf lock: producers, consumers, closedAt
	producers map[uint64]*producer
	consumers map[uint64]*consumer
	// closedAt holds the producers that the broker closed (CLOSE_PRODUCER) in the last
	// recentlyClosedFor, by id: a SEND for one of them is dropped, not answered by closing the
	// connection (access.go, closeProducer).
	closedAt map[uint64]time.Time

	protoVersion  int32     // set by the reader before any other goroutine reads it
	clientVersion string    // CONNECT.client_version, for the admin stats; set like protoVersion
	since         time.Time // when CONNECT arrived; set like protoVersion
	role          string    // the authenticated principal (WithAuth); set like protoVersion
}

type producer struct {
	id        uint64
	name      string
	t         *topic
	c         *conn
	exclusive bool // set under the topic lock

	reqID         uint64 // PRODUCER request, answered again when a waiting producer becomes ready
	schemaVersion []byte
	topicEpoch    *uint64           // CommandProducer.topic_epoch: set when the client reconnects a producer
	metadata      map[string]string // CommandProducer.metadata, for the admin stats
}

// outbound is a frame for a connection, collected under a topic lock and enqueued after unlocking.
type outbound struct {
	c     *conn
	frame []byte
}

func send(outs []outbound) {
	for _, o := range outs {
		o.c.enqueue(o.frame)
	}
}

func (b *Broker) newConn(nc net.Conn) *conn {
	b.mu.Lock()
	b.connSeq++
	id := b.connSeq
	c := &conn{
		b: b, nc: nc, id: id,
		log:       b.log.With("conn", id, "remote", nc.RemoteAddr().String()),
		outSig:    make(chan struct{}, 1),
		done:      make(chan struct{}),
		producers: map[uint64]*producer{},
		closedAt:  map[uint64]time.Time{},
		consumers: map[uint64]*consumer{},
	}
	b.conns[c] = struct{}{}
	b.mu.Unlock()
	c.log.Info("pulsartest: connection opened")
	return c
}

// enqueue queues a frame for the writer; it never blocks.
func (c *conn) enqueue(frame []byte) {
	if frame == nil {
		return
	}
	c.outMu.Lock()
	c.out = append(c.out, frame)
	c.outMu.Unlock()
	select {
	case c.outSig <- struct{}{}:
	default:
	}
}

func (c *conn) sendCmd(cmd *wire.BaseCommand) {
	c.enqueue(c.encode(cmd))
}

func (c *conn) encode(cmd *wire.BaseCommand) []byte {
	if c.dropped(false, cmd) {
		return nil
	}
	f, err := wire.EncodeCommand(cmd)
	if err != nil {
		c.log.Error("pulsartest: encode", "type", cmd.GetType().String(), "err", err)
		return nil
	}
	c.trace("out", cmd)
	return f
}

// dropped asks the command hook about cmd.
func (c *conn) dropped(inbound bool, cmd *wire.BaseCommand) bool {
	hook := c.b.opts.hook
	return hook != nil && hook(CommandInfo{Inbound: inbound, Type: cmd.GetType().String()}) == Drop
}

func (c *conn) trace(dir string, cmd *wire.BaseCommand) {
	if c.b.debug {
		c.log.Debug("pulsartest: "+dir+" "+cmd.GetType().String(), "cmd", cmd.String())
	}
}

func (c *conn) writeLoop() {
	defer c.b.wg.Done()
	w := bufio.NewWriterSize(c.nc, 64*1024)
	for {
		select {
		case <-c.done:
			return
		case <-c.outSig:
		}
		c.outMu.Lock()
		batch := c.out
		c.out = nil
		c.outMu.Unlock()
		for _, f := range batch {
			if _, err := w.Write(f); err != nil {
				c.close()
				return
			}
		}
		if err := w.Flush(); err != nil {
			c.close()
			return
		}
	}
}

func (c *conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// close shuts the connection down; teardown of its producers and consumers runs in the reader.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.done)
		_ = c.nc.Close()
	})
}

func (c *conn) readLoop() {
	defer c.b.wg.Done()
	defer c.teardown()
	defer c.close()
	r := bufio.NewReaderSize(c.nc, 64*1024)
	maxFrame := c.b.opts.maxMessageSize + wire.FramePadding
	connected := false
	for {
		f, err := wire.ReadFrame(r, maxFrame)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.log.Info("pulsartest: read", "err", err)
			}
			return
		}
		c.trace("in", f.Cmd)
		if !connected {
			if f.Cmd.GetType() != wire.BaseCommand_CONNECT || !c.handleConnect(f.Cmd.GetConnect()) {
				return
			}
			connected = true
			continue
		}
		if c.dropped(true, f.Cmd) {
			continue
		}
		c.handle(f)
	}
}

func (c *conn) teardown() {
	c.mu.Lock()
	prods := make([]*producer, 0, len(c.producers))
	for _, p := range c.producers {
		prods = append(prods, p)
	}
	cons := make([]*consumer, 0, len(c.consumers))
	for _, k := range c.consumers {
		cons = append(cons, k)
	}
	c.producers, c.consumers = map[uint64]*producer{}, map[uint64]*consumer{}
	c.mu.Unlock()
	for _, p := range prods {
		p.t.removeProducer(p)
	}
	for _, k := range cons {
		k.sub.t.removeConsumer(k, false)
	}
	c.b.mu.Lock()
	delete(c.b.conns, c)
	c.b.mu.Unlock()
	c.log.Info("pulsartest: connection closed")
}

func ptr[T any](v T) *T { return &v }

func cmdType(t wire.BaseCommand_Type) *wire.BaseCommand_Type { return &t }

func (c *conn) sendError(reqID uint64, code ServerError, format string, args ...any) {
	c.sendCmd(errorCmd(reqID, code, format, args...))
}

func errorCmd(reqID uint64, code ServerError, format string, args ...any) *wire.BaseCommand {
	return &wire.BaseCommand{Type: cmdType(wire.BaseCommand_ERROR), Error: &wire.CommandError{
		RequestId: ptr(reqID), Error: code.wire(), Message: ptr(fmt.Sprintf(format, args...)),
	}}
}

func successCmd(reqID uint64) *wire.BaseCommand {
	return &wire.BaseCommand{Type: cmdType(wire.BaseCommand_SUCCESS), Success: &wire.CommandSuccess{RequestId: ptr(reqID)}}
}

func (c *conn) handleConnect(cc *wire.CommandConnect) bool {
	if tok := c.b.opts.authToken; tok != "" {
		if cc.GetAuthMethodName() != "token" || string(cc.GetAuthData()) != tok {
			_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
			f := c.encode(errorCmd(0, AuthenticationError, "pulsartest: authentication failed"))
			_, _ = c.nc.Write(f)
			return false
		}
	}
	if a := c.b.opts.auth; a != nil {
		role, err := a.authenticate(cc.GetAuthMethodName(), cc.GetAuthData(), c.connState())
		if err != nil {
			_ = c.nc.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = c.nc.Write(c.encode(errorCmd(0, AuthenticationError, "%v", err)))
			return false
		}
		c.role = role
	}
	pv := min(cc.GetProtocolVersion(), maxProtocolVersion)
	c.protoVersion = pv
	c.clientVersion, c.since = cc.GetClientVersion(), time.Now()
	c.log.Info("pulsartest: client connected", "client", cc.GetClientVersion(), "protocol", pv)
	c.sendCmd(&wire.BaseCommand{Type: cmdType(wire.BaseCommand_CONNECTED), Connected: &wire.CommandConnected{
		ServerVersion:   ptr(serverVersion),
		ProtocolVersion: ptr(pv),
		MaxMessageSize:  ptr(int32(c.b.opts.maxMessageSize)), //nolint:gosec // configured size
		FeatureFlags:    &wire.FeatureFlags{SupportsAuthRefresh: ptr(true), SupportsBrokerEntryMetadata: ptr(true)},
	}})
	return true
}

//nolint:gocyclo,cyclop,funlen // a flat command switch reads best
func (c *conn) handle(f wire.Frame) {
	cmd := f.Cmd
	switch cmd.GetType() {
	case wire.BaseCommand_PING:
		c.sendCmd(&wire.BaseCommand{Type: cmdType(wire.BaseCommand_PONG), Pong: &wire.CommandPong{}})
	case wire.BaseCommand_PONG, wire.BaseCommand_AUTH_RESPONSE:
	case wire.BaseCommand_PARTITIONED_METADATA:
		c.handlePartitionedMetadata(cmd.GetPartitionMetadata())
	case wire.BaseCommand_LOOKUP:
		c.handleLookup(cmd.GetLookupTopic())
	case wire.BaseCommand_PRODUCER:
		c.handleProducer(cmd.GetProducer())
	case wire.BaseCommand_SEND:
		c.handleSend(cmd.GetSend(), f.Payload)
	case wire.BaseCommand_CLOSE_PRODUCER:
		c.handleCloseProducer(cmd.GetCloseProducer())
	case wire.BaseCommand_SUBSCRIBE:
		c.handleSubscribe(cmd.GetSubscribe())
	case wire.BaseCommand_FLOW:
		if k := c.consumer(cmd.GetFlow().GetConsumerId()); k != nil {
			k.sub.t.flow(k, int64(cmd.GetFlow().GetMessagePermits()))
		}
	case wire.BaseCommand_ACK:
		c.handleAck(cmd.GetAck())
	case wire.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES:
		r := cmd.GetRedeliverUnacknowledgedMessages()
		if k := c.consumer(r.GetConsumerId()); k != nil {
			k.sub.t.redeliver(k, r.GetMessageIds())
		}
	case wire.BaseCommand_CLOSE_CONSUMER:
		cc := cmd.GetCloseConsumer()
		c.mu.Lock()
		k := c.consumers[cc.GetConsumerId()]
		delete(c.consumers, cc.GetConsumerId())
		c.mu.Unlock()
		if k != nil {
			k.sub.t.removeConsumer(k, false)
		}
		c.sendCmd(successCmd(cc.GetRequestId()))
	case wire.BaseCommand_UNSUBSCRIBE:
		c.handleUnsubscribe(cmd.GetUnsubscribe())
	case wire.BaseCommand_SEEK:
		c.handleSeek(cmd.GetSeek())
	case wire.BaseCommand_GET_LAST_MESSAGE_ID:
		c.handleGetLastMessageID(cmd.GetGetLastMessageId())
	case wire.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		g := cmd.GetGetTopicsOfNamespace()
		c.sendCmd(&wire.BaseCommand{
			Type: cmdType(wire.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE),
			GetTopicsOfNamespaceResponse: &wire.CommandGetTopicsOfNamespaceResponse{
				RequestId: ptr(g.GetRequestId()), Topics: c.topicsOfNamespace(g),
				Filtered: ptr(false), Changed: ptr(true),
			},
		})
	case wire.BaseCommand_GET_SCHEMA:
		c.handleGetSchema(cmd.GetGetSchema())
	case wire.BaseCommand_GET_OR_CREATE_SCHEMA:
		c.handleGetOrCreateSchema(cmd.GetGetOrCreateSchema())
	case wire.BaseCommand_TC_CLIENT_CONNECT_REQUEST, wire.BaseCommand_NEW_TXN, wire.BaseCommand_ADD_PARTITION_TO_TXN,
		wire.BaseCommand_ADD_SUBSCRIPTION_TO_TXN, wire.BaseCommand_END_TXN:
		c.handleTxnCommand(cmd) // txn.go
	case wire.BaseCommand_WATCH_TOPIC_LIST:
		c.sendError(cmd.GetWatchTopicList().GetRequestId(), NotAllowedError, "pulsartest: topic list watchers are not supported")
	case wire.BaseCommand_CONSUMER_STATS:
		c.sendError(cmd.GetConsumerStats().GetRequestId(), NotAllowedError, "pulsartest: consumer stats are not supported")
	default:
		c.log.Warn("pulsartest: unsupported command ignored", "type", cmd.GetType().String())
	}
}

// topicsOfNamespace lists the namespace's topics of the requested domain(s).
func (c *conn) topicsOfNamespace(g *wire.CommandGetTopicsOfNamespace) []string {
	var out []string
	for _, t := range c.b.topicsOfNamespace(g.GetNamespace()) {
		switch np := isNonPersistent(t); g.GetMode() {
		case wire.CommandGetTopicsOfNamespace_ALL:
		case wire.CommandGetTopicsOfNamespace_NON_PERSISTENT:
			if !np {
				continue
			}
		default:
			if np {
				continue
			}
		}
		out = append(out, t)
	}
	return out
}

func (c *conn) consumer(id uint64) *consumer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.consumers[id]
}

// lookupTopic makes the checks that a lookup and a partitioned-metadata request share: an
// injected lookup fault first, then the topic's name, then the role's permission. It returns the fully qualified topic, or the error code and message to answer
// with when ok is false.
func (c *conn) lookupTopic(topic string) (fq string, code ServerError, msg string, ok bool) {
	if fault, faulted := c.b.takeLookupFault(); faulted {
		return "", fault, "pulsartest: injected lookup failure", false
	}
	fq, err := normalizeTopic(topic)
	if err != nil {
		return "", InvalidTopicName, invalidTopicMessage(topic), false
	}
	if !c.mayUse(fq) {
		return "", AuthorizationError, "pulsartest: role " + strconv.Quote(c.role) + " may not use " + fq, false
	}
	return fq, 0, "", true
}

func (c *conn) handlePartitionedMetadata(m *wire.CommandPartitionedTopicMetadata) {
	resp := &wire.CommandPartitionedTopicMetadataResponse{RequestId: ptr(m.GetRequestId())}
	out := &wire.BaseCommand{Type: cmdType(wire.BaseCommand_PARTITIONED_METADATA_RESPONSE), PartitionMetadataResponse: resp}
	fq, code, msg, ok := c.lookupTopic(m.GetTopic())
	if !ok {
		resp.Response = wire.CommandPartitionedTopicMetadataResponse_Failed.Enum()
		resp.Error, resp.Message = code.wire(), ptr(msg)
		c.sendCmd(out)
		return
	}
	if c.b.beyondPartitions(fq) {
		resp.Response = wire.CommandPartitionedTopicMetadataResponse_Failed.Enum()
		resp.Error = TopicNotFound.wire()
		c.sendCmd(out)
		return
	}
	resp.Partitions = ptr(uint32(c.b.partitions(fq))) //nolint:gosec // small
	resp.Response = wire.CommandPartitionedTopicMetadataResponse_Success.Enum()
	c.sendCmd(out)
}

func (c *conn) handleLookup(m *wire.CommandLookupTopic) {
	resp := &wire.CommandLookupTopicResponse{RequestId: ptr(m.GetRequestId())}
	out := &wire.BaseCommand{Type: cmdType(wire.BaseCommand_LOOKUP_RESPONSE), LookupTopicResponse: resp}
	if _, code, msg, ok := c.lookupTopic(m.GetTopic()); !ok {
		resp.Response = wire.CommandLookupTopicResponse_Failed.Enum()
		resp.Error, resp.Message = code.wire(), ptr(msg)
		c.sendCmd(out)
		return
	}
	resp.Response = wire.CommandLookupTopicResponse_Connect.Enum()
	resp.BrokerServiceUrl = ptr(c.b.url)
	if u := c.b.tlsURL(); u != "" {
		resp.BrokerServiceUrlTls = ptr(u)
	}
	resp.Authoritative = ptr(true)
	c.sendCmd(out)
}

func (c *conn) handleProducer(m *wire.CommandProducer) {
	reqID := m.GetRequestId()
	fq, err := normalizeTopic(m.GetTopic())
	if err != nil {
		c.sendError(reqID, InvalidTopicName, "%s", invalidTopicMessage(m.GetTopic()))
		return
	}
	if !c.mayUse(fq) {
		c.sendError(reqID, AuthorizationError, "pulsartest: role %q may not produce on %s", c.role, fq)
		return
	}
	if c.b.beyondPartitions(fq) {
		c.sendError(reqID, TopicNotFound, "Topic not found %s", fq)
		return
	}
	c.mu.Lock()
	existing := c.producers[m.GetProducerId()]
	c.mu.Unlock()
	if existing != nil {
		c.sendProducerSuccess(reqID, existing.name, nil)
		return
	}
	t, err := c.b.getTopic(fq, true)
	if err != nil {
		c.sendError(reqID, TopicNotFound, "%v", err)
		return
	}
	if code, ok := c.b.takeAttachFault(t); ok {
		c.sendError(reqID, code, "Topic is temporarily unavailable")
		return
	}
	name := m.GetProducerName()
	if name == "" {
		name = c.b.nextProducerName()
	}
	var version []byte
	if s := m.GetSchema(); s != nil {
		version = c.b.getOrCreateSchema(t.base, s)
	}
	p := &producer{
		id: m.GetProducerId(), name: name, t: t, c: c, reqID: reqID, schemaVersion: version,
		topicEpoch: m.TopicEpoch, metadata: kvMap(m.GetMetadata()),
	}
	res := t.addProducer(p, m.GetProducerAccessMode(), m.GetInitialSubscriptionName())
	send(res.outs)
	if res.msg != "" {
		c.sendError(reqID, res.code, "%s", res.msg)
		return
	}
	c.mu.Lock()
	c.producers[p.id] = p
	c.mu.Unlock()
	c.sendCmd(producerSuccessCmd(reqID, name, version, res.ready, res.epoch))
}

func (c *conn) sendProducerSuccess(reqID uint64, name string, version []byte) {
	c.sendCmd(producerSuccessCmd(reqID, name, version, true, nil))
}

func producerSuccessCmd(reqID uint64, name string, version []byte, ready bool, epoch *uint64) *wire.BaseCommand {
	return &wire.BaseCommand{Type: cmdType(wire.BaseCommand_PRODUCER_SUCCESS), ProducerSuccess: &wire.CommandProducerSuccess{
		RequestId: ptr(reqID), ProducerName: ptr(name), LastSequenceId: ptr(int64(-1)),
		SchemaVersion: version, ProducerReady: ptr(ready), TopicEpoch: epoch,
	}}
}

func (c *conn) sendSendError(pid, seq uint64, code ServerError, msg string) {
	c.sendCmd(&wire.BaseCommand{Type: cmdType(wire.BaseCommand_SEND_ERROR), SendError: &wire.CommandSendError{
		ProducerId: ptr(pid), SequenceId: ptr(seq), Error: code.wire(), Message: ptr(msg),
	}})
}

func (c *conn) handleSend(m *wire.CommandSend, payload []byte) {
	pid, seq := m.GetProducerId(), m.GetSequenceId()
	c.mu.Lock()
	p := c.producers[pid]
	c.mu.Unlock()
	if p == nil {
		if c.recentlyClosed(pid) {
			// The broker closed this producer a moment ago and the client has not yet read the
			// CLOSE_PRODUCER: Apache Pulsar drops such a SEND, and the client, which still holds
			// the message as pending, resends it or fails it when it reconnects.
			c.log.Debug("pulsartest: send for a producer the broker closed, dropped", "producer", pid)
			return
		}
		// Like a real broker: a SEND for a producer that is not (or no longer) registered closes the
		// connection, so the client reconnects and resends. A SEND_ERROR would detach the producer for good.
		c.log.Warn("pulsartest: send for unknown producer, closing the connection", "producer", pid)
		c.close()
		return
	}
	if p.t.terminated.Load() {
		if c.recentlyClosed(pid) {
			// terminate closed p after the lookup above: the same case as a SEND that arrives
			// after it, dropped. A SEND_ERROR here is the flake that terminate.go names.
			c.log.Debug("pulsartest: send raced the topic's termination, dropped", "producer", pid)
			return
		}
		c.sendSendError(pid, seq, TopicTerminatedError, "Topic was already terminated")
		return
	}
	if code, ok := c.b.takeSendFault(p.t); ok {
		c.sendSendError(pid, seq, code, "pulsartest: injected send failure")
		return
	}
	md, err := wire.ParsePayload(payload)
	if err != nil {
		code := PersistenceError
		if errors.Is(err, wire.ErrChecksum) {
			code = ChecksumError
		}
		msg := "pulsartest: " + err.Error()
		if code == ChecksumError {
			msg = "Checksum failed on the broker" // Pulsar 4.0's text
		}
		c.sendSendError(pid, seq, code, msg)
		return
	}
	var txn *txnID
	if x, ok := txnOf(m.TxnidMostBits, m.TxnidLeastBits); ok {
		if c.b.tc == nil {
			c.sendSendError(pid, seq, NotAllowedError, txnRefused)
			return
		}
		txn = &x
	}
	e := newEntry(payload, md, c.b.opts.clock.Now().UnixMilli())
	id, outs, ok := p.t.append(e, txn)
	if !ok {
		// The topic was terminated between the check above and the append, and terminate closed
		// this producer under the same lock: the SEND reached a producer the broker had closed.
		c.log.Debug("pulsartest: send raced the topic's termination, dropped", "producer", pid)
		return
	}
	c.sendCmd(&wire.BaseCommand{Type: cmdType(wire.BaseCommand_SEND_RECEIPT), SendReceipt: &wire.CommandSendReceipt{
		ProducerId: ptr(pid), SequenceId: ptr(seq),
		MessageId:         &wire.MessageIdData{LedgerId: ptr(p.t.ledgerID), EntryId: ptr(uint64(id))}, //nolint:gosec // ids >= 0
		HighestSequenceId: ptr(m.GetHighestSequenceId()),
	}})
	send(outs)
}

func (c *conn) handleCloseProducer(m *wire.CommandCloseProducer) {
	c.mu.Lock()
	p := c.producers[m.GetProducerId()]
	delete(c.producers, m.GetProducerId())
	c.mu.Unlock()
	if p != nil {
		p.t.removeProducer(p)
	}
	c.sendCmd(successCmd(m.GetRequestId()))
}

func (c *conn) handleSubscribe(m *wire.CommandSubscribe) {
	reqID := m.GetRequestId()
	// read_compacted is accepted: compaction never runs here, so a compacted read sees the whole topic, as on
	// a Pulsar topic that was never compacted.
	if m.GetReplicateSubscriptionState() {
		c.sendError(reqID, NotAllowedError, "pulsartest: geo-replication (replicate_subscription_state) is not supported")
		return
	}
	fq, err := normalizeTopic(m.GetTopic())
	if err != nil {
		c.sendError(reqID, InvalidTopicName, "%s", invalidTopicMessage(m.GetTopic()))
		return
	}
	if !c.mayUse(fq) {
		c.sendError(reqID, AuthorizationError, "pulsartest: role %q may not consume from %s", c.role, fq)
		return
	}
	if c.b.beyondPartitions(fq) {
		c.sendError(reqID, TopicNotFound, "Topic %s does not exist", fq)
		return
	}
	c.mu.Lock()
	existing := c.consumers[m.GetConsumerId()]
	c.mu.Unlock()
	if existing != nil {
		if existing.sub.t.name == fq && existing.sub.name == m.GetSubscription() {
			c.sendCmd(successCmd(reqID))
		} else {
			c.sendError(reqID, ConsumerBusy, "pulsartest: consumer id %d is already in use", m.GetConsumerId())
		}
		return
	}
	t, err := c.b.getTopic(fq, m.GetForceTopicCreation())
	if err != nil {
		c.sendError(reqID, TopicNotFound, "%v", err)
		return
	}
	if code, ok := c.b.takeAttachFault(t); ok {
		c.sendError(reqID, code, "Topic is temporarily unavailable")
		return
	}
	if s := m.GetSchema(); s != nil {
		c.b.getOrCreateSchema(t.base, s)
	}
	k, code, msg := t.subscribe(c, m)
	if msg != "" {
		c.sendError(reqID, code, "%s", msg)
		return
	}
	t.mu.Lock()
	k.metadata = kvMap(m.GetMetadata())
	t.mu.Unlock()
	c.mu.Lock()
	c.consumers[k.id] = k
	c.mu.Unlock()
	c.sendCmd(successCmd(reqID))
}

func (c *conn) handleAck(m *wire.CommandAck) {
	k := c.consumer(m.GetConsumerId())
	if x, ok := txnOf(m.TxnidMostBits, m.TxnidLeastBits); ok && k != nil {
		c.handleTxnAck(k, m, x)
		return
	}
	if k != nil {
		k.sub.t.ack(k, m)
	}
	// An ACK for a consumer the connection does not have goes unanswered, as on Pulsar 4.0, even when it asks
	// for a response.
	if m.RequestId != nil && k != nil {
		resp := &wire.CommandAckResponse{ConsumerId: ptr(m.GetConsumerId()), RequestId: ptr(m.GetRequestId())}
		c.sendCmd(&wire.BaseCommand{Type: cmdType(wire.BaseCommand_ACK_RESPONSE), AckResponse: resp})
	}
}

func (c *conn) handleUnsubscribe(m *wire.CommandUnsubscribe) {
	k := c.consumer(m.GetConsumerId())
	if k == nil {
		c.sendError(m.GetRequestId(), MetadataError, "%s", consumerNotFound)
		return
	}
	if code, msg := k.sub.t.unsubscribe(k, m.GetForce()); msg != "" {
		c.sendError(m.GetRequestId(), code, "%s", msg)
		return
	}
	c.mu.Lock()
	delete(c.consumers, k.id)
	c.mu.Unlock()
	c.sendCmd(successCmd(m.GetRequestId()))
}

func (c *conn) handleSeek(m *wire.CommandSeek) {
	k := c.consumer(m.GetConsumerId())
	if k == nil {
		c.sendError(m.GetRequestId(), MetadataError, "%s", consumerNotFound)
		return
	}
	k.sub.t.seek(k.sub, m)
	c.sendCmd(successCmd(m.GetRequestId()))
}

// consumerNotFound is Pulsar's answer (MetadataError) to a command for a consumer id the connection does not have.
const consumerNotFound = "Consumer not found"

func (c *conn) handleGetLastMessageID(m *wire.CommandGetLastMessageId) {
	k := c.consumer(m.GetConsumerId())
	if k == nil {
		c.sendError(m.GetRequestId(), MetadataError, "%s", consumerNotFound)
		return
	}
	if k.sub.t.nonPersistent {
		// Pulsar 4.0 answers so: a non-persistent topic has no transaction buffer to wait for.
		c.sendError(m.GetRequestId(), UnknownError, "Failed to recover Transaction Buffer.")
		return
	}
	last, markDelete := k.sub.t.lastMessageID(k.sub)
	c.sendCmd(&wire.BaseCommand{
		Type: cmdType(wire.BaseCommand_GET_LAST_MESSAGE_ID_RESPONSE),
		GetLastMessageIdResponse: &wire.CommandGetLastMessageIdResponse{
			RequestId: ptr(m.GetRequestId()), LastMessageId: last, ConsumerMarkDeletePosition: markDelete,
		},
	})
}

func (c *conn) handleGetSchema(m *wire.CommandGetSchema) {
	resp := &wire.CommandGetSchemaResponse{RequestId: ptr(m.GetRequestId())}
	fq, err := normalizeTopic(m.GetTopic())
	if err == nil {
		base, _ := splitPartition(fq)
		if c.b.partitions(base) == 0 {
			base = fq
		}
		if s, v, ok := c.b.getSchema(base, m.GetSchemaVersion()); ok {
			resp.Schema, resp.SchemaVersion = s, v
		} else {
			err = fmt.Errorf("%w: no schema for %s", ErrTopicNotFound, fq)
		}
	}
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = TopicNotFound.wire(), ptr(err.Error())
	}
	c.sendCmd(&wire.BaseCommand{Type: cmdType(wire.BaseCommand_GET_SCHEMA_RESPONSE), GetSchemaResponse: resp})
}

func (c *conn) handleGetOrCreateSchema(m *wire.CommandGetOrCreateSchema) {
	resp := &wire.CommandGetOrCreateSchemaResponse{RequestId: ptr(m.GetRequestId())}
	fq, err := normalizeTopic(m.GetTopic())
	if err != nil {
		resp.ErrorCode, resp.ErrorMessage = InvalidTopicName.wire(), ptr(err.Error())
	} else {
		base, _ := splitPartition(fq)
		if c.b.partitions(base) == 0 {
			base = fq
		}
		s, _ := proto.Clone(m.GetSchema()).(*wire.Schema)
		resp.SchemaVersion = c.b.getOrCreateSchema(base, s)
	}
	c.sendCmd(&wire.BaseCommand{Type: cmdType(wire.BaseCommand_GET_OR_CREATE_SCHEMA_RESPONSE), GetOrCreateSchemaResponse: resp})
}
