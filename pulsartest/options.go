package pulsartest

import (
	"log/slog"
	"time"
)

// Option configures a Broker.
type Option func(*options)

// FailoverSelection chooses how a Failover subscription on a non-partitioned topic picks its active consumer.
type FailoverSelection int

// Failover selection modes.
const (
	// SortedByName picks the first consumer in (name) order; partition i picks sorted[i % n]. Only the
	// consumers of the highest priority level are candidates, in either mode.
	SortedByName FailoverSelection = iota
	// ConsistentHash picks the consumer nearest murmur3(topic) on a ring of consumer names, as Apache Pulsar
	// 3.x and 4.0 do on non-partitioned topics (for the same topic and names the same consumer as Pulsar
	// 4.0.7); partitions still pick sorted[i % n], as Pulsar does by default.
	ConsistentHash
)

// KeySharedSelector chooses how an AUTO_SPLIT Key_Shared subscription maps key hashes to consumers.
type KeySharedSelector int

// Key_Shared selectors.
const (
	// ConsistentHashing places 100 points per consumer name on a Murmur3 ring
	// (subscriptionKeySharedUseConsistentHashing=true, the common configuration of recent Pulsar versions).
	ConsistentHashing KeySharedSelector = iota
	// AutoSplitHashRange gives the first consumer the whole range 0..65535; each new consumer takes half of the
	// largest range and a leaving consumer's range merges into its neighbour.
	AutoSplitHashRange
)

type options struct {
	addr                   string
	clock                  Clock
	realisticTiming        bool
	redeliveryOnDisconnect bool
	maxMessageSize         int
	brokerEntryMetadata    bool
	failoverSelection      FailoverSelection
	keySharedSelector      KeySharedSelector
	inactiveTopicGC        time.Duration
	retention              Retention     // retention.go
	trimInterval           time.Duration // retention.go
	adminAddr              string
	tls                    tlsOptions    // tls.go
	auth                   *Auth         // auth.go
	quotaCheck             time.Duration // backlog_quota.go
	hook                   func(CommandInfo) Verdict
	batchIndexAck          bool
	transactions           bool // txn.go
	clusterName            string
	authToken              string
	logger                 *slog.Logger
}

func defaultOptions() options {
	return options{
		addr:           "127.0.0.1:0",
		clock:          wallClock{},
		maxMessageSize: 5 * 1024 * 1024,
		clusterName:    "standalone",
		logger:         slog.New(slog.DiscardHandler),
	}
}

// WithAddr sets the listen address; URL and LOOKUP advertise exactly this host and the bound port.
// Default: "127.0.0.1:0".
func WithAddr(addr string) Option { return func(o *options) { o.addr = addr } }

// WithClock sets the clock driving delayed delivery, the failover delay and broker timestamps.
// Default: the wall clock.
func WithClock(c Clock) Option {
	return func(o *options) {
		if c != nil {
			o.clock = c
		}
	}
}

// WithRealisticTiming adds the 1 s failover delay and 1 s delayed-delivery tick of a real broker.
// Default: off (immediate and exact).
func WithRealisticTiming(on bool) Option { return func(o *options) { o.realisticTiming = on } }

// WithRedeliveryOnDisconnect increments the redelivery count of entries re-queued when a Shared or Key_Shared
// consumer leaves while others remain (Pulsar 2.5 to 2.x behaviour). Default: off, as Apache Pulsar 3.x and
// 4.0 do: a consumer that closes or loses its connection leaves its unacknowledged entries to the others with
// the counts they had (TestRedeliveryCountAfterConsumerLeaves measures it on 4.0.7).
func WithRedeliveryOnDisconnect(on bool) Option {
	return func(o *options) { o.redeliveryOnDisconnect = on }
}

// WithMaxMessageSize sets CONNECTED.max_message_size; a small value forces client-side chunking.
// Default: 5242880.
func WithMaxMessageSize(n int) Option {
	return func(o *options) {
		if n > 0 {
			o.maxMessageSize = n
		}
	}
}

// WithBrokerEntryMetadata adds a BrokerEntryMetadata block (broker timestamp, index) to every MESSAGE.
// Default: off.
func WithBrokerEntryMetadata(on bool) Option { return func(o *options) { o.brokerEntryMetadata = on } }

// WithFailoverSelection sets how a Failover subscription on a non-partitioned topic picks its active consumer.
// Default: SortedByName.
func WithFailoverSelection(m FailoverSelection) Option {
	return func(o *options) { o.failoverSelection = m }
}

// WithKeySharedSelector sets how AUTO_SPLIT Key_Shared subscriptions (the Go client's default) map keys to
// consumers. Default: ConsistentHashing.
func WithKeySharedSelector(m KeySharedSelector) Option {
	return func(o *options) { o.keySharedSelector = m }
}

// WithInactiveTopicGC deletes, every interval, the non-partitioned topics that have no producers, no consumers
// and no subscriptions, with their data, like a real broker's inactive-topic GC (60 s,
// delete_when_no_subscriptions). Partitions of partitioned topics are never collected. Default: off (0).
func WithInactiveTopicGC(every time.Duration) Option {
	return func(o *options) { o.inactiveTopicGC = max(every, 0) }
}

// WithAdminHTTP serves the admin REST subset (topics, partitioned topics, subscriptions; HTTP 501 for
// termination, compaction, deduplication and replication) on addr, e.g. "127.0.0.1:0"; see Broker.AdminURL.
// Default: off.
func WithAdminHTTP(addr string) Option { return func(o *options) { o.adminAddr = addr } }

// CommandInfo describes one protocol command passing through the broker, for a command hook.
type CommandInfo struct {
	Inbound bool   // sent by a client (false: sent by the broker)
	Type    string // wire name, e.g. "SEND", "SEND_RECEIPT", "MESSAGE", "FLOW"
}

// Verdict is a command hook's decision.
type Verdict int

// Command hook verdicts.
const (
	// Pass handles or sends the command normally.
	Pass Verdict = iota
	// Drop discards the command: an inbound one is not processed, an outbound one is not sent (a lost
	// SEND_RECEIPT, for instance, surfaces as the client's send timeout).
	Drop
)

// WithCommandHook calls hook for every command after the handshake, inbound and outbound. It runs on broker
// goroutines, sometimes under a topic lock: it must be fast, must not call the Broker, and must be safe for
// concurrent use. Default: none.
func WithCommandHook(hook func(CommandInfo) Verdict) Option {
	return func(o *options) { o.hook = hook }
}

// WithBatchIndexAck honours batch-index acknowledgements (ack_set). Default: off.
func WithBatchIndexAck(on bool) Option { return func(o *options) { o.batchIndexAck = on } }

// WithClusterName sets the cluster name used in generated producer names. Default: "standalone".
func WithClusterName(s string) Option {
	return func(o *options) {
		if s != "" {
			o.clusterName = s
		}
	}
}

// WithAuthToken makes CONNECT require auth method "token" with exactly this token. It is not security.
// Default: any credentials are accepted.
func WithAuthToken(tok string) Option { return func(o *options) { o.authToken = tok } }

// WithLogger sets the logger; the broker logs connections at Info and every command at Debug.
// Default: a logger that discards everything.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

const realisticDelay = time.Second

// WithTransactions runs the transaction coordinator subset that pulsar-client-go uses (one
// coordinator, TC_CLIENT_CONNECT_REQUEST, NEW_TXN with its timeout, ADD_PARTITION_TO_TXN,
// ADD_SUBSCRIPTION_TO_TXN, END_TXN, sends and acknowledgements inside a transaction), as a Pulsar
// broker with transactionCoordinatorEnabled=true; see the package documentation for the rules
// and limits. Default: off, as in Pulsar, where a client created with EnableTransaction fails
// with "The broker doesn't enable the transaction coordinator".
func WithTransactions() Option { return func(o *options) { o.transactions = true } }
