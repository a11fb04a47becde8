// Package pulsartest is an in-process broker that speaks the Apache Pulsar binary protocol over TCP, so that the
// unmodified github.com/apache/pulsar-client-go runs against it as against Apache Pulsar, without Docker or a JVM.
//
// # Usage
//
//	b := pulsartest.NewBroker(t)
//	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: b.URL()})
//
// Start runs a broker outside tests; Close stops it and waits for all its goroutines. State lives in memory only.
// The command "bq broker" serves one on 127.0.0.1:6650 for experiments with any client.
//
// # What it implements
//
// CONNECT, PING/PONG, PARTITIONED_METADATA, LOOKUP (always answering with the broker's own URL), PRODUCER, SEND
// (batches, chunks and compressed payloads are stored as received; the CRC32-C checksum is verified), SUBSCRIBE with
// the four subscription types and initial positions, non-durable subscriptions (readers; removed with their last
// consumer, as in Pulsar), FLOW permits counted in messages, ACK (individual, cumulative, batch index with
// WithBatchIndexAck, ACK_RESPONSE), REDELIVER_UNACKNOWLEDGED_MESSAGES, SEEK by id and by time, GET_LAST_MESSAGE_ID,
// UNSUBSCRIBE, CLOSE_PRODUCER and CLOSE_CONSUMER in both directions, GET_SCHEMA and GET_OR_CREATE_SCHEMA (an in-memory
// registry), GET_TOPICS_OF_NAMESPACE. Transactions, topic-list watchers, consumer stats, compaction and geo-replication
// are answered with a protocol ERROR (NotAllowedError) naming the feature; the connection stays open.
//
// Broker semantics follow Apache Pulsar 3.x:
//
//   - Exclusive and Failover have one active consumer; a negative ack rewinds the cursor (everything unacked is
//     delivered again, redelivery count 0) and deliver_at_time is ignored. Failover picks the consumer first in
//     name order (partition i: sorted[i % n]) and sends ACTIVE_CONSUMER_CHANGE after the consumer's first FLOW.
//   - Shared and Key_Shared track pending entries per consumer, count redeliveries, honour delayed delivery and
//     re-queue a leaving consumer's entries. Shared hands out up to 20 entries per consumer in turn and pins the
//     chunks of one message to one consumer. Key_Shared routes by Murmur3 of the ordering key, else the partition
//     key, else "NONE_KEY", on a consistent-hash ring of consumer names (100 points each; WithKeySharedSelector
//     switches to auto-split hash ranges) or the declared ranges of STICKY consumers, and holds a hash back from
//     a new owner while its old owner has unacked entries of it (PIP-379 draining hashes).
//   - WithRealisticTiming adds the 1 s failover delay and the 1 s delayed-delivery tick; WithInactiveTopicGC
//     deletes idle non-partitioned topics with their data.
//   - Partitioned topics exist only through CreatePartitionedTopic; unknown topics are created as non-partitioned
//     on PRODUCER and SUBSCRIBE.
//
// # Retention and trimming
//
// Pulsar keeps an entry only while a durable subscription still needs it, unless a retention policy keeps it
// longer; the default policy keeps nothing. Entries written while a topic had no subscription, and entries that
// every durable subscription has acknowledged (up to its mark-delete position), are deleted when the broker
// trims its ledgers. Readers (non-durable subscriptions) protect nothing: a trim moves them past what it removed.
//
// The embedded broker models that in Trim and TrimAll, with WithRetention for a namespace retention policy
// (a time and a size limit, InfiniteRetention), but unlike Pulsar it never trims unless asked: by default every
// entry stays until Close, and tests that read a topic again later see everything that was written. For Pulsar's
// behaviour, call Trim where a real broker may have trimmed, or set WithTrimInterval (a real broker checks every
// 120 s and after each ledger rollover). After a trim a reader or a new subscription at Earliest starts at the
// first entry kept, GET_LAST_MESSAGE_ID still answers with the last entry written, backlogs and Stats count what
// is kept, and message ids are never reused.
//
// Not modelled: ledgers (Pulsar deletes whole ledgers and never the one it is writing, so removed entries can
// stay readable on a real broker until the next rollover; pulsartest removes them entry by entry), message TTL,
// backlog quotas, tiered storage and per-topic policies.
//
// # Concurrency
//
// Every connection has one reader goroutine, which handles commands in arrival order, and one writer goroutine
// that drains an unbounded queue. Dispatch runs under the topic lock and only collects frames; they are queued
// after unlocking, so no goroutine writes to a socket or blocks while holding a topic lock, and a slow consumer
// only grows its own connection's queue. The broker never pushes beyond a consumer's permits.
//
// # Fault injection
//
// DropConnections, UnloadTopic, FailNextSends, FailNextLookups and PauseDispatch/ResumeDispatch emulate broker
// failures; WithCommandHook drops chosen commands in either direction (a lost receipt, a lost FLOW); Faults
// counts what was injected. Backlog, Stats, Topics and Subscriptions inspect state.
//
// # Performance
//
// pulsar-client-go v0.19.0 through the broker on loopback, 1 KiB payloads, 2-core AMD EPYC, go test -bench
// -benchtime=200000x (BenchmarkProduceBatched, BenchmarkConsumeAck): batched asynchronous publishing runs at
// about 7.1-7.7 µs per message (130,000-140,000 messages/s, 130-145 MB/s); receiving plus acknowledging on a
// Shared subscription at about 3.9-6.5 µs per message (150,000-260,000 messages/s). In a CPU profile of both
// benchmarks the broker's goroutines account for about a quarter of the samples (mostly socket reads) and the
// client for the rest, so the broker is not the bottleneck of the SDK's benchmarks. Everything is kept in
// memory: a benchmark holds all its payloads until Close (or Trim).
//
// # Deviations from BROKER.md
//
//   - The admin REST subset (WithAdminHTTP) covers listing, creating and deleting topics and partitioned
//     topics, partition metadata and subscription lists; other endpoints answer 404, the out-of-scope ones 501.
//   - Everything lives in the pulsartest package apart from the generated protocol types in internal/wire.
//   - The broker never pings idle clients (optional in the spec); it answers the client's PINGs.
//   - Consumer.Seek(id) with the Go client resumes after id, because the client filters the sought entry that
//     the broker redelivers; scenario 14 pins this.
package pulsartest
