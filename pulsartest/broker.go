package pulsartest

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// serverVersion is what CONNECTED reports.
const serverVersion = "pulsartest"

// maxProtocolVersion is the newest protocol version pulsartest speaks.
const maxProtocolVersion = 20

// Broker is an in-process broker speaking the Pulsar binary protocol on a TCP listener.
type Broker struct {
	opts  options
	log   *slog.Logger
	debug bool // log every command
	ln    net.Listener
	url   string

	// life guards closed and wg.Add, so that no goroutine is started once Close began.
	life   sync.RWMutex
	closed bool
	wg     sync.WaitGroup
	once   sync.Once

	mu          sync.Mutex // guards the maps below; taken before any topic lock
	topics      map[string]*topic
	partitioned map[string]int
	schemas     map[string][]*wire.Schema
	conns       map[*conn]struct{}
	ledgerSeq   uint64
	producerSeq uint64
	connSeq     uint64

	faultMu     sync.Mutex // leaf lock: fault injection state
	failSends   map[string]*sendFault
	failAttach  map[string]*sendFault // FailNextAttaches
	failLookups int

	tc        *coordinator // WithTransactions (txn.go); nil without
	lookupErr ServerError
	paused    map[string]bool

	gcStop func() bool // guarded by mu
	admin  *adminServer

	quotas quotaState // backlog_quota.go

	tlsLn         net.Listener // WithTLS (tls.go)
	tlsServiceURL string

	trimStop func() bool // guarded by mu; WithTrimInterval (retention.go)

	injectedSendErrors   atomic.Int64
	injectedLookupErrors atomic.Int64
	drops                atomic.Int64
}

type sendFault struct {
	n   int
	err ServerError
}

// Start listens and serves until Close. ctx bounds startup only.
func Start(ctx context.Context, opts ...Option) (*Broker, error) {
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if err := o.retention.validate(); err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", o.addr)
	if err != nil {
		return nil, fmt.Errorf("pulsartest: listen %s: %w", o.addr, err)
	}
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("pulsartest: listen address %q: %w", o.addr, err)
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	tcpAddr, ok := ln.Addr().(*net.TCPAddr)
	if !ok {
		_ = ln.Close()
		return nil, fmt.Errorf("pulsartest: listener address %v is not TCP", ln.Addr())
	}
	port := tcpAddr.Port
	b := &Broker{
		opts:        o,
		debug:       o.logger.Enabled(ctx, slog.LevelDebug),
		log:         o.logger,
		ln:          ln,
		url:         "pulsar://" + net.JoinHostPort(host, strconv.Itoa(port)),
		topics:      map[string]*topic{},
		partitioned: map[string]int{},
		schemas:     map[string][]*wire.Schema{},
		conns:       map[*conn]struct{}{},
		ledgerSeq:   100,
		failSends:   map[string]*sendFault{},
		failAttach:  map[string]*sendFault{},
		paused:      map[string]bool{},
	}
	if o.transactions {
		b.tc = newCoordinator(b)
	}
	adminTLS, err := b.listenTLS(ctx, &lc)
	if err != nil {
		_ = ln.Close()
		return nil, err
	}
	if o.adminAddr != "" {
		aln, err := lc.Listen(ctx, "tcp", o.adminAddr)
		if err != nil {
			_ = ln.Close()
			b.closeTLSListeners(adminTLS)
			return nil, fmt.Errorf("pulsartest: admin listen %s: %w", o.adminAddr, err)
		}
		b.startAdmin(aln)
	}
	if adminTLS != nil {
		if b.admin == nil {
			b.startAdmin(nil)
		}
		b.admin.serveAdminTLS(adminTLS)
	}
	if b.tlsLn != nil {
		b.wg.Add(1)
		go b.acceptLoop(b.tlsLn)
	}
	if o.inactiveTopicGC > 0 {
		b.mu.Lock()
		b.scheduleGCLocked()
		b.mu.Unlock()
	}
	if o.trimInterval > 0 {
		b.mu.Lock()
		b.scheduleTrimLocked()
		b.mu.Unlock()
	}
	b.wg.Add(1)
	go b.acceptLoop(b.ln)
	b.log.Info("pulsartest: broker listening", "url", b.url)
	return b, nil
}

// NewBroker starts a broker for a test, fails the test on error and closes the broker in tb.Cleanup.
func NewBroker(tb testing.TB, opts ...Option) *Broker {
	tb.Helper()
	b, err := Start(tb.Context(), opts...)
	if err != nil {
		tb.Fatalf("pulsartest: start broker: %v", err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// URL returns the service URL, "pulsar://host:port"; LOOKUP advertises the same URL.
func (b *Broker) URL() string { return b.url }

// Addr returns the listener's address.
func (b *Broker) Addr() net.Addr { return b.ln.Addr() }

// Close stops the listener, closes every connection, stops all goroutines and timers and drops all state.
// It is idempotent and waits for every goroutine of the broker to return.
func (b *Broker) Close() error {
	var err error
	b.once.Do(func() {
		b.life.Lock()
		b.closed = true
		b.life.Unlock()
		err = b.ln.Close()
		b.closeTLSListeners(nil)
		b.stopQuotaCheck()
		if b.admin != nil {
			b.admin.close()
		}
		b.mu.Lock()
		conns := make([]*conn, 0, len(b.conns))
		for c := range b.conns {
			conns = append(conns, c)
		}
		topics := make([]*topic, 0, len(b.topics))
		for _, t := range b.topics {
			topics = append(topics, t)
		}
		if b.gcStop != nil {
			b.gcStop()
		}
		if b.trimStop != nil {
			b.trimStop()
		}
		b.mu.Unlock()
		for _, c := range conns {
			c.close()
		}
		for _, t := range topics {
			t.stopTimers()
		}
		if b.tc != nil {
			b.tc.close()
		}
		b.wg.Wait()
		b.mu.Lock()
		b.topics = map[string]*topic{}
		b.partitioned = map[string]int{}
		b.schemas = map[string][]*wire.Schema{}
		b.mu.Unlock()
		b.log.Info("pulsartest: broker closed", "url", b.url)
	})
	if err != nil {
		return fmt.Errorf("pulsartest: close listener: %w", err)
	}
	return nil
}

// enter registers a goroutine or callback with the broker's wait group; it reports false once Close began.
func (b *Broker) enter() bool {
	b.life.RLock()
	defer b.life.RUnlock()
	if b.closed {
		return false
	}
	b.wg.Add(1)
	return true
}

// acceptLoop serves a listener, the plain one or the pulsar+ssl:// one, until it closes.
func (b *Broker) acceptLoop(ln net.Listener) {
	defer b.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			return
		}
		b.life.RLock()
		if b.closed {
			b.life.RUnlock()
			_ = nc.Close()
			return
		}
		b.wg.Add(2)
		b.life.RUnlock()
		c := b.newConn(nc)
		go c.readLoop()
		go c.writeLoop()
	}
}

// getTopic returns the topic, creating a non-partitioned topic when create is set.
func (b *Broker) getTopic(fq string, create bool) (*topic, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if t, ok := b.topics[fq]; ok {
		return t, nil
	}
	if _, ok := b.partitioned[fq]; ok {
		return nil, fmt.Errorf("%w: %s is a partitioned topic; use its partitions", ErrInvalidTopic, fq)
	}
	if !create {
		return nil, fmt.Errorf("%w: %s", ErrTopicNotFound, fq)
	}
	return b.createTopicLocked(fq), nil
}

func (b *Broker) createTopicLocked(fq string) *topic {
	b.ledgerSeq++
	base, idx := splitPartition(fq)
	if _, ok := b.partitioned[base]; !ok {
		base, idx = fq, -1
	}
	t := newTopic(b, fq, base, idx, b.ledgerSeq)
	b.topics[fq] = t
	return t
}

// topicsFor resolves a user name to its topics: the partitions of a partitioned topic, or the topic itself.
func (b *Broker) topicsFor(name string) []*topic {
	fq, err := normalizeTopic(name)
	if err != nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n, ok := b.partitioned[fq]; ok {
		out := make([]*topic, 0, n)
		for i := range n {
			if t := b.topics[fq+partitionSuffix+strconv.Itoa(i)]; t != nil {
				out = append(out, t)
			}
		}
		return out
	}
	if t := b.topics[fq]; t != nil {
		return []*topic{t}
	}
	return nil
}

// CreateTopic creates a non-partitioned topic.
func (b *Broker) CreateTopic(name string) error {
	fq, err := normalizeTopic(name)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.topics[fq]; ok {
		return fmt.Errorf("%w: %s", ErrTopicExists, fq)
	}
	if _, ok := b.partitioned[fq]; ok {
		return fmt.Errorf("%w: %s", ErrTopicExists, fq)
	}
	b.createTopicLocked(fq)
	return nil
}

// CreatePartitionedTopic creates a partitioned topic with n partitions (n >= 1) named "<name>-partition-<i>".
func (b *Broker) CreatePartitionedTopic(name string, n int) error {
	fq, err := normalizeTopic(name)
	if err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("%w: %d partitions", ErrInvalidTopic, n)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.partitioned[fq]; ok {
		return fmt.Errorf("%w: %s", ErrTopicExists, fq)
	}
	if _, ok := b.topics[fq]; ok {
		return fmt.Errorf("%w: %s", ErrTopicExists, fq)
	}
	b.partitioned[fq] = n
	for i := range n {
		p := fq + partitionSuffix + strconv.Itoa(i)
		if _, ok := b.topics[p]; !ok {
			b.createTopicLocked(p)
		}
	}
	return nil
}

// DeleteTopic deletes a topic (all partitions of a partitioned topic) with its data and subscriptions. It fails
// with ErrTopicBusy while producers or consumers are connected.
func (b *Broker) DeleteTopic(name string) error {
	fq, err := normalizeTopic(name)
	if err != nil {
		return err
	}
	ts := b.topicsFor(fq)
	b.mu.Lock()
	_, part := b.partitioned[fq]
	b.mu.Unlock()
	if len(ts) == 0 && !part {
		return fmt.Errorf("%w: %s", ErrTopicNotFound, fq)
	}
	for _, t := range ts {
		if n := t.usage(); n > 0 {
			return &busyError{topic: t.name, usage: n}
		}
	}
	b.mu.Lock()
	delete(b.partitioned, fq)
	delete(b.schemas, fq)
	for _, t := range ts {
		delete(b.topics, t.name)
	}
	b.mu.Unlock()
	for _, t := range ts {
		t.stopTimers()
	}
	return nil
}

// Topics returns the fully qualified names of all topics, partitions included, sorted.
func (b *Broker) Topics() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]string, 0, len(b.topics))
	for n := range b.topics {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Subscriptions returns the subscription names of a topic (the union over the partitions of a partitioned
// topic), sorted.
func (b *Broker) Subscriptions(topicName string) []string {
	set := map[string]struct{}{}
	for _, t := range b.topicsFor(topicName) {
		for _, s := range t.subscriptionNames() {
			set[s] = struct{}{}
		}
	}
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Backlog returns the number of messages (not entries) of the topic not yet acknowledged by the subscription,
// summed over the partitions of a partitioned topic. It is 0 for unknown topics or subscriptions. The admin
// API's msgBacklog counts entries instead, a batch as one, as Pulsar's does.
func (b *Broker) Backlog(topicName, sub string) int {
	n := 0
	for _, t := range b.topicsFor(topicName) {
		n += t.backlog(sub)
	}
	return n
}

// TopicStats is a snapshot of a topic (summed over partitions for a partitioned topic).
type TopicStats struct {
	Entries       int                          // stored entries
	Messages      int                          // stored messages (batches counted per message)
	StorageSize   int                          // bytes of the stored entries (Pulsar's storageSize)
	Producers     int                          // connected producers
	Subscriptions map[string]SubscriptionStats // by subscription name
	// InjectedSendErrors counts SEND_ERRORs caused by FailNextSends on this topic.
	InjectedSendErrors int
}

// SubscriptionStats is a snapshot of one subscription.
type SubscriptionStats struct {
	Type      string // Exclusive, Shared, Failover or Key_Shared
	Durable   bool
	Consumers int
	Backlog   int // messages not acknowledged
	Pending   int // entries dispatched and not acknowledged (Shared and Key_Shared)
	Permits   int // sum of the consumers' permits
	Replay    int // entries waiting for redelivery
	Delayed   int // entries held back by delayed delivery
}

// Stats returns a snapshot of the topic.
func (b *Broker) Stats(topicName string) TopicStats {
	st := TopicStats{Subscriptions: map[string]SubscriptionStats{}}
	for _, t := range b.topicsFor(topicName) {
		t.addStats(&st)
	}
	return st
}

// FaultStats counts the faults injected so far, broker-wide.
type FaultStats struct {
	SendErrors   int // SEND_ERRORs caused by FailNextSends
	LookupErrors int // LOOKUP and PARTITIONED_METADATA failures caused by FailNextLookups
	Drops        int // DropConnections calls
}

// Faults returns the faults injected so far.
func (b *Broker) Faults() FaultStats {
	return FaultStats{
		SendErrors:   int(b.injectedSendErrors.Load()),
		LookupErrors: int(b.injectedLookupErrors.Load()),
		Drops:        int(b.drops.Load()),
	}
}

// DropConnections closes every client connection, as a broker crash or network failure would.
func (b *Broker) DropConnections() {
	b.drops.Add(1)
	b.mu.Lock()
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// UnloadTopic sends CLOSE_PRODUCER and CLOSE_CONSUMER to every client of the topic (all partitions of a
// partitioned topic), which makes the clients look the topic up again and reconnect. Every acknowledgement the
// broker received stays; on Pulsar an unload can lose one it is still persisting (seen on 4.0.7 with an ack that
// came with the consumer's close), and the message is delivered again.
func (b *Broker) UnloadTopic(topicName string) {
	for _, t := range b.topicsFor(topicName) {
		t.unload()
	}
}

// StrandConsumers forgets every consumer of the subscription on the topic (all partitions of a
// partitioned topic) without telling its client, and returns how many it forgot. Their unacknowledged
// messages go back to the subscription, for its other consumers or for the next one. It is what Apache
// Pulsar was left with when pulsar-client-go v0.19.0 dropped a CLOSE_CONSUMER that arrived between the
// answer to its SUBSCRIBE and its registering the consumer on the connection: the broker holds no consumer,
// the client waits for messages for ever, and a GET_LAST_MESSAGE_ID for the consumer is answered with
// MetadataError "Consumer not found". Its ACKs go unanswered and change nothing, as on Pulsar.
// pulsar-client-go v0.21.0 registers the consumer before it sends SUBSCRIBE (apache/pulsar-client-go#1476),
// so that gap no longer strands it; the fault still stands for any broker that forgets a consumer without
// telling its client, which a client's own guard (such as a check of an idle consumer) must survive.
func (b *Broker) StrandConsumers(topicName, subscription string) int {
	n := 0
	for _, t := range b.topicsFor(topicName) {
		n += t.strand(subscription)
	}
	return n
}

// FailNextSends makes the next n SENDs on the topic (any partition of a partitioned topic) fail with
// SEND_ERROR(err) without storing anything.
func (b *Broker) FailNextSends(topicName string, n int, err ServerError) {
	b.setFault(b.failSends, topicName, n, err)
}

// FailNextAttaches makes the next n SUBSCRIBE and PRODUCER commands on the topic (any partition of a
// partitioned topic) fail with err, with the text Pulsar gives while it unloads or moves a topic: ServiceNotReady
// "Topic is temporarily unavailable" is what a consumer or producer created during an unload meets on Apache
// Pulsar (an existing one reconnects through it). n <= 0 clears it.
func (b *Broker) FailNextAttaches(topicName string, n int, err ServerError) {
	b.setFault(b.failAttach, topicName, n, err)
}

// setFault arms (n > 0) or clears (n <= 0) the fault of faults for topicName; a name that is
// not a topic arms nothing.
func (b *Broker) setFault(faults map[string]*sendFault, topicName string, n int, err ServerError) {
	fq, e := normalizeTopic(topicName)
	if e != nil {
		return
	}
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	if n <= 0 {
		delete(faults, fq)
		return
	}
	faults[fq] = &sendFault{n: n, err: err}
}

// FailNextLookups makes the next n LOOKUP and PARTITIONED_METADATA requests fail with err.
func (b *Broker) FailNextLookups(n int, err ServerError) {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	b.failLookups, b.lookupErr = n, err
}

// PauseDispatch stops pushing messages of the topic (all partitions of a partitioned topic) to consumers; sends
// are still stored and receipted.
func (b *Broker) PauseDispatch(topicName string) {
	fq, err := normalizeTopic(topicName)
	if err != nil {
		return
	}
	b.faultMu.Lock()
	b.paused[fq] = true
	b.faultMu.Unlock()
}

// ResumeDispatch undoes PauseDispatch and dispatches what accumulated.
func (b *Broker) ResumeDispatch(topicName string) {
	fq, err := normalizeTopic(topicName)
	if err != nil {
		return
	}
	b.faultMu.Lock()
	delete(b.paused, fq)
	b.faultMu.Unlock()
	for _, t := range b.topicsFor(fq) {
		t.kick()
	}
}

func (b *Broker) isPaused(t *topic) bool {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	return b.paused[t.name] || b.paused[t.base]
}

// takeSendFault consumes one injected send failure for the topic, if any.
func (b *Broker) takeSendFault(t *topic) (ServerError, bool) {
	err, ok := b.takeFault(b.failSends, t)
	if ok {
		b.injectedSendErrors.Add(1)
		t.injectedSendErrors.Add(1)
	}
	return err, ok
}

// takeAttachFault consumes one injected SUBSCRIBE or PRODUCER failure for the topic, if any.
func (b *Broker) takeAttachFault(t *topic) (ServerError, bool) {
	return b.takeFault(b.failAttach, t)
}

// takeFault consumes one fault of faults (keyed by topic or partitioned topic) for t.
func (b *Broker) takeFault(faults map[string]*sendFault, t *topic) (ServerError, bool) {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	for _, k := range []string{t.name, t.base} {
		if f := faults[k]; f != nil && f.n > 0 {
			f.n--
			if f.n == 0 {
				delete(faults, k)
			}
			return f.err, true
		}
	}
	return 0, false
}

func (b *Broker) takeLookupFault() (ServerError, bool) {
	b.faultMu.Lock()
	defer b.faultMu.Unlock()
	if b.failLookups > 0 {
		b.failLookups--
		b.injectedLookupErrors.Add(1)
		return b.lookupErr, true
	}
	return 0, false
}

func (b *Broker) nextProducerName() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.producerSeq++
	return b.opts.clusterName + "-0-" + strconv.FormatUint(b.producerSeq, 10)
}

// schema registry, keyed by the partitioned (base) topic name.

func schemaVersionBytes(v int) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) } //nolint:gosec // small

func (b *Broker) getOrCreateSchema(base string, s *wire.Schema) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	list := b.schemas[base]
	for i, have := range list {
		if have.GetType() == s.GetType() && string(have.GetSchemaData()) == string(s.GetSchemaData()) {
			return schemaVersionBytes(i)
		}
	}
	b.schemas[base] = append(list, s)
	return schemaVersionBytes(len(list))
}

func (b *Broker) getSchema(base string, version []byte) (*wire.Schema, []byte, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	list := b.schemas[base]
	if len(list) == 0 {
		return nil, nil, false
	}
	if len(version) == 0 {
		return list[len(list)-1], schemaVersionBytes(len(list) - 1), true
	}
	if len(version) != 8 {
		return nil, nil, false
	}
	v := binary.BigEndian.Uint64(version)
	if v >= uint64(len(list)) {
		return nil, nil, false
	}
	return list[v], version, true
}

func (b *Broker) topicsOfNamespace(ns string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for n := range b.topics {
		if namespaceOf(n) == ns {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// beyondPartitions reports whether fq names a partition at or past its partitioned topic's count, which does
// not exist: Pulsar answers its partitioned metadata, a PRODUCER and a SUBSCRIBE with TopicNotFound.
func (b *Broker) beyondPartitions(fq string) bool {
	base, i := splitPartition(fq)
	if i < 0 {
		return false
	}
	n := b.partitions(base)
	return n > 0 && int(i) >= n
}

func (b *Broker) partitions(fq string) int {
	if b.tc != nil && fq == tcAssignTopic {
		return numCoordinators
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.partitioned[fq]
}

func (b *Broker) scheduleGCLocked() {
	b.gcStop = b.opts.clock.AfterFunc(b.opts.inactiveTopicGC, func() {
		if !b.enter() {
			return
		}
		defer b.wg.Done()
		b.collectInactiveTopics()
	})
}

// collectInactiveTopics deletes the non-partitioned topics without producers, consumers and subscriptions.
func (b *Broker) collectInactiveTopics() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, t := range b.topics {
		if t.partition >= 0 || !t.inactive() {
			continue
		}
		delete(b.topics, name)
		delete(b.schemas, name)
		b.log.Info("pulsartest: inactive topic deleted", "topic", name)
	}
	b.life.RLock()
	closed := b.closed
	b.life.RUnlock()
	if !closed {
		b.scheduleGCLocked()
	}
}
