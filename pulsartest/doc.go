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
// registry), GET_TOPICS_OF_NAMESPACE, non-persistent:// topics, read_compacted (on Exclusive and Failover
// subscriptions; Shared and Key_Shared ones are refused with NotAllowedError, as in Pulsar), topic termination and
// namespace backlog quotas, over plain TCP and TLS, with token, basic and client-certificate authentication, and
// with WithTransactions the transaction coordinator subset below.
//
// # Transactions
//
// WithTransactions (bq broker --transactions) runs one transaction coordinator, as a Pulsar standalone with
// transactionCoordinatorEnabled=true does: the partitioned metadata of
// persistent://pulsar/system/transaction_coordinator_assign answers one partition, over the binary protocol and
// the admin API, and LOOKUP of its partition this broker. It answers TC_CLIENT_CONNECT_REQUEST, NEW_TXN (the
// field txn_ttl_seconds holds milliseconds, as every client sends it; at the timeout the coordinator aborts the
// transaction), ADD_PARTITION_TO_TXN, ADD_SUBSCRIPTION_TO_TXN and END_TXN (commit or abort), and GET
// /admin/v3/transactions/transactionMetadata/{most}/{least} for an open transaction. A transaction that ended,
// committed, aborted or timed out, is forgotten, as in Pulsar: a further END_TXN or ADD_*_TO_TXN for it, like
// one for an id never opened, answers TransactionNotFound ("The transaction with this txdID `(0,5)`not
// found "), the admin API 404; a coordinator id other than 0 answers TransactionCoordinatorNotFound on NEW_TXN
// and ServiceNotReady on TC_CLIENT_CONNECT_REQUEST (TestTxnErrorCodes).
//
// The rules, checked against Apache Pulsar 4.0.7 by the dual-target tests (scenario_txn_test.go):
//
//   - A SEND with a transaction id is stored and receipted at once but delivered to no subscription until the
//     transaction ends, and neither is anything stored after it: reads stop before the first entry of the
//     oldest open transaction on the topic (Pulsar's maxReadPosition), which GET_LAST_MESSAGE_ID reports too.
//   - A commit releases the entries. An abort releases them as well; only an entry whose MessageMetadata carries
//     the aborted transaction's id (txnid_most_bits and txnid_least_bits) is skipped, and acknowledged for the
//     subscription, as Pulsar's dispatcher does (it reads the id from the entry's metadata, not from the
//     SEND). pulsar-client-go v0.21.0, as v0.19.0 before it, puts the id on CommandSend only
//     (apache/pulsar-client-go#1498, still open), so what an aborted transaction of the Go client sent is
//     delivered, on Pulsar and here alike; the Java client writes the id into the metadata, and its aborted
//     messages are never delivered.
//   - An ACK with a transaction id makes its entries pending on the subscription: not acknowledged (backlogs
//     count them), not delivered to any consumer, also not after their consumer left. A commit acknowledges
//     them, an abort (or the timeout) gives them back for redelivery, with the redelivery count raised on
//     Shared and Key_Shared, by a rewind on Exclusive and Failover. Acknowledging inside a transaction what
//     another transaction holds, or what is acknowledged already, answers ACK_RESPONSE with
//     TransactionConflict and Pulsar's text ("… try to ack message:L:E (ackSet is null) in pending ack
//     status." or "… already acked before."). A plain acknowledgement of a pending entry acknowledges it.
//
// Deliberate limits: no commit and abort markers are written into the topics (Pulsar appends one entry per
// ended transaction to every partition it sent to, which the dispatcher skips; message ids after a transaction
// therefore differ from Pulsar's); cumulative and batch-index acknowledgements inside a transaction answer
// NotAllowedError (pulsar-client-go sends neither); an ACK or SEND naming a transaction the coordinator does not
// know as open is refused (the ACK with its TransactionNotFound answer) or stored as a plain entry (the SEND),
// where Pulsar's buffer, which does not ask the coordinator, would hold the topic back; a transaction ends on
// every topic it sent to and every subscription it acknowledged on, whether or not ADD_*_TO_TXN named them;
// nothing survives Close. Without WithTransactions the broker behaves as Pulsar with its coordinator off: the
// coordinator topic has no partitions, so pulsar-client-go's NewClient with EnableTransaction fails with
// ErrTransactionCoordinatorNotEnabled ("The broker doesn't enable the transaction coordinator"), and the
// coordinator's commands answer ERROR (NotAllowedError) naming the option.
//
// # Still refused, and why
//
//   - Geo-replication (SUBSCRIBE.replicate_subscription_state): there is one cluster; replicate_to and
//     replicated_from pass through untouched.
//   - Topic-list watchers and consumer stats (WATCH_TOPIC_LIST, CONSUMER_STATS): the Go client never sends them.
//
// These are answered with a protocol ERROR (NotAllowedError) naming the feature; the connection stays open. The
// admin subset answers HTTP 501 for running compaction (a compacted read therefore sees the whole topic, as on a
// Pulsar topic that was never compacted), deduplication and replication, and 404 for endpoints outside the subset.
//
// # Producer access modes
//
// As in Pulsar: a Shared producer is refused with ProducerBusy while an exclusive producer holds the topic or one
// waits for it; an Exclusive producer is refused with ProducerFenced (on which the client gives up) while any
// producer is connected or waiting; a WaitForExclusive producer is queued (producer_ready=false) and takes the
// topic when the exclusive producer ahead of it leaves (not when the last Shared one does, as in Pulsar); an
// ExclusiveWithFencing producer removes every connected producer and fails the waiting ones. As in Pulsar 4.0 a
// removed producer is not told (no CLOSE_PRODUCER): its next SEND closes its connection, and its reconnect is
// refused with ProducerFenced. Every new exclusive
// owner moves the topic epoch on, and a producer reconnecting with an older epoch is fenced.
//
// # TLS and authentication
//
// WithTLS serves pulsar+ssl:// next to the plain listener and WithAdminTLS the admin subset over HTTPS.
// WithAuth verifies HS256 JWT tokens, basic user:password pairs and client-certificate common names, gives
// clients without credentials an anonymous role (or refuses them), and restricts the namespaces it lists to
// their granted roles and the super users; unlike Pulsar, a namespace it does not list is open to every role.
// It is for testing clients' credentials, not security.
//
// Broker semantics follow Apache Pulsar 4.0 (checked against 4.0.7 by the dual-target tests; where 3.x
// differs, an option says so):
//
//   - Exclusive and Failover have one active consumer; a negative ack rewinds the cursor (everything unacked is
//     delivered again, redelivery count 0) and deliver_at_time is ignored. Failover chooses among the consumers
//     of the highest priority level (the lowest CommandSubscribe.priority_level) sorted by name: on partition i
//     the (i mod n)-th of them, on a non-partitioned topic the first one; Pulsar 4.0 picks there by consistent
//     hash of the topic name, which WithFailoverSelection(ConsistentHash) reproduces. It sends
//     ACTIVE_CONSUMER_CHANGE after the consumer's first FLOW.
//   - Shared and Key_Shared track pending entries per consumer, count redeliveries, honour delayed delivery (a
//     message is due once the millisecond of its deliver_at_time has passed: never before the time its producer
//     asked for, which the client truncates to the millisecond, and at most 1 ms after it) and re-queue a leaving
//     consumer's entries. Shared serves only the consumers of the highest priority level that have permits, up to
//     20 entries per consumer in turn, and a lower level only while none of them has any; it pins the chunks of
//     one message to one consumer. Key_Shared ignores priority levels, as Pulsar does. pulsar-client-go v0.21.0
//     sets a priority level with ConsumerOptions.PriorityLevel (apache/pulsar-client-go#1487; it always sends
//     priority_level, 0 unless set), as other clients do (the Java client's priorityLevel); v0.19.0 could
//     not. Key_Shared routes by Murmur3 of the ordering key, else the partition key, else "NONE_KEY", on a
//     consistent-hash ring of consumer names (100 points each; WithKeySharedSelector switches to auto-split hash
//     ranges) or the declared ranges of STICKY consumers, and holds a hash back from a new owner while its old
//     owner has unacked entries of it (PIP-379 draining hashes).
//   - WithRealisticTiming adds the 1 s failover delay and the 1 s delayed-delivery tick; WithInactiveTopicGC
//     deletes idle non-partitioned topics with their data.
//   - Partitioned topics exist only through CreatePartitionedTopic; unknown topics are created as non-partitioned
//     on PRODUCER and SUBSCRIBE. A partition at or past a partitioned topic's count is refused with TopicNotFound
//     on PARTITIONED_METADATA, PRODUCER ("Topic not found …") and SUBSCRIBE ("Topic … does not exist"), as in
//     Pulsar.
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
// 120 s and after each ledger rollover). The admin subset answers Pulsar's trim call (POST …/trim) with Trim, so a
// test can force a trim the same way on both brokers: PUT …/unload, which on Pulsar closes the ledger being
// written, then POST …/trim. After a trim a reader or a new subscription at Earliest starts at the
// first entry kept, GET_LAST_MESSAGE_ID answers with the last entry written while any entry is kept and with
// -1:-1 once none is, as for a topic never written to (so Reader.HasNext is false on a fully trimmed topic, as on
// Pulsar 4.0), backlogs and Stats count what is kept, and message ids are never reused.
//
// Not modelled: ledgers (Pulsar deletes whole ledgers and never the one it is writing, so removed entries can
// stay readable on a real broker until the next rollover; pulsartest removes them entry by entry: on Pulsar 4.0
// a trim call without the unload before it deletes nothing of a topic whose entries are all in its current
// ledger, on the embedded broker it deletes them), message TTL, tiered storage and per-topic policies. Namespace
// backlog quotas are enforced (SetBacklogQuota, WithBacklogQuotaCheck).
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
// DropConnections, UnloadTopic, FailNextSends, FailNextAttaches (a SUBSCRIBE or PRODUCER refused as during an
// unload), StrandConsumers (the broker forgets a subscription's consumers without telling their clients),
// FailNextLookups and PauseDispatch/ResumeDispatch emulate broker failures; WithCommandHook drops chosen commands in either direction (a lost receipt, a lost FLOW); Faults
// counts what was injected. Backlog, Stats, Topics and Subscriptions inspect state.
//
// # Performance
//
// Measured with pulsar-client-go v0.19.0, before go.mod moved to v0.21.0, through the broker on loopback, 1 KiB
// payloads, 2-core AMD EPYC, go test -bench -benchtime=200000x (BenchmarkProduceBatched, BenchmarkConsumeAck):
// batched asynchronous publishing ran at about 7.1-7.7 µs per message (130,000-140,000 messages/s,
// 130-145 MB/s); receiving plus acknowledging on a Shared subscription at about 3.9-6.5 µs per message
// (150,000-260,000 messages/s). In a CPU profile of both benchmarks the broker's goroutines accounted for about
// a quarter of the samples (mostly socket reads) and the client for the rest, so the broker is not the
// bottleneck of the SDK's benchmarks. Everything is kept in memory: a benchmark holds all its payloads until
// Close (or Trim).
//
// # Errors
//
// A refused command answers with Apache Pulsar 4.0's error code and text, which the Go client shows as
// "server error: <code>: <text>" (TestErrorsOfRefusedConsumers, TestErrorsOfRefusedProducers,
// TestErrorsOfRawCommands, TestErrorsOfTheAdminAPI): "Exclusive consumer is already connected", "Subscription is
// of different type. Active subscription type of 'Shared' is different than the connecting consumer's type
// 'Failover'.", a refused PRODUCER with the broker's exception class first
// ("org.apache.pulsar.broker.service.BrokerServiceException$TopicTerminatedException: Topic was already
// terminated"), MetadataError "Consumer not found" for a command naming a consumer the connection does not have,
// UnknownError "Failed to recover Transaction Buffer." for GET_LAST_MESSAGE_ID on a non-persistent topic,
// InvalidTopicName "Invalid topic name: Invalid named entity: …" for a tenant or namespace name with a character
// other than letters, digits and _-=:. (a topic's local name may hold any), and the admin API's
// "Topic persistent://… not found", "This topic already exists" and, for deleting a topic with connected
// clients, "Topic has 3 connected producers/consumers" (a partitioned one: "Topic has active
// producers/subscriptions"). A SEND for a producer the broker closed in the last 30 s (termination, unload,
// backlog quota) is dropped without an answer, and a SEND for a producer that never existed closes the
// connection, as in Pulsar (TestSendToAProducerTheBrokerClosed). Texts of what only pulsartest refuses (unsupported features, injected faults, its authentication and authorization)
// begin with "pulsartest: ". Deliberate limits:
//
//   - Tenants and namespaces exist implicitly for the binary protocol: a producer or consumer in a namespace
//     that nobody created is accepted, where Pulsar 4.0 refuses the lookup (TopicNotFound "Namespace not found")
//     and the subscribe (ServiceNotReady). The module's tests and most users' tests use topics in any
//     namespace without creating it; enforcing it would make every one of them call the admin API first. The
//     admin API follows suit: it creates a topic in a namespace nobody created, where Pulsar answers 404
//     "Namespace not found", and lists the namespaces of a tenant nobody created as [], where Pulsar answers
//     404 "Tenant not found". It also deletes a namespace with its topics on ?force=true, which Pulsar refuses
//     with 405 "Broker doesn't allow forced deletion of namespaces" unless forceDeleteNamespaceAllowed is set.
//   - An admin path outside the subset answers 404 with a JSON reason that says so; Pulsar answers 404 with
//     Jetty's HTML page for paths it does not know, and other codes for the endpoints it has.
//   - The conflict text of overlapping STICKY hash ranges renders the other consumer as Pulsar's
//     Consumer.toString does; its address part (a Netty channel id) is not the same. Match on
//     "Range conflict with consumer".
//
// # Notes and deviations
//
//   - The admin REST subset (WithAdminHTTP, WithAdminTLS) covers topics and partitioned topics (create with a
//     count or pulsaradmin's metadata body, grow, delete, list), partition metadata, subscriptions, stats and
//     partitioned stats (msgBacklog counts entries, a batch as one, as in Pulsar), a message by id and peeking a
//     subscription (both answer the uncompressed payload; a peek creates a missing subscription, durable and at
//     the earliest entry, as Pulsar's does), unload, trim (Trim), termination, namespaces (create, delete, list,
//     topics, backlog quotas), HTTP lookup and schemas; other endpoints answer 404, the out-of-scope ones 501.
//   - Measured with pulsar-client-go v0.19.0's own package tests (tools/fidelity, make fidelity): every test
//     that does not need a Pulsar container of its own passes, the 11 TestTxn_ ones included. The result is
//     v0.19.0's: v0.21.0's tests, which add some (priority levels, null values, giving up a reconnect), were
//     not part of that run.
//   - Everything lives in the pulsartest package apart from the generated protocol types in internal/wire.
//   - The broker never pings idle clients (optional in the spec); it answers the client's PINGs.
//   - Consumer.Seek(id) with the Go client resumes after id, because the client filters the sought entry that
//     the broker redelivers; scenario 14 pins this.
package pulsartest
