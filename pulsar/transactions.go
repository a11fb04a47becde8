package pulsar

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	"go.uber.org/zap"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

// Exactly-once settlement (WithTransactions): each delivery runs in one Pulsar transaction,
// opened when the message is admitted and carried by the delivery's context. Everything the
// settlement writes (the retry republish, the dead-letter copy) and everything the handler
// publishes with that context through a [Publisher] is sent inside it (the handler's
// publishes held back until it succeeded, txnState), the original is acknowledged inside it,
// and the transaction is committed last. A settlement that does not acknowledge (a negative
// ack, a failed write, a handler that outlived the transaction's timeout) aborts it, and the
// message comes back; what the attempt wrote is discarded (but see WithTransactions for the
// client's limit on aborted sends).

// ErrTransactions is matched by the error of [NewConsumer] and [WrapConsumer] when
// [WithTransactions] cannot be honoured: the client was created without
// ClientOptions.EnableTransaction, the broker runs without its transaction coordinator
// (transactionCoordinatorEnabled=false in broker.conf), or the consumer settles in a way that
// cannot acknowledge inside a transaction. The consumer never falls back to settling outside
// a transaction.
var ErrTransactions = errors.New("pulsar: transactions unavailable")

// WithTransactions settles every delivery exactly once on the broker's side, in one Pulsar
// transaction per delivery with the given timeout: the acknowledgement of the original,
// the retry republish or dead-letter copy, and the handler's own publishes are committed
// together, or not at all. A [Publisher] called with the handler's ctx holds its publishes
// back while the handler runs: Publish returns meta.id at once, and PublishAsync's
// callback waits. Once the handler returned nil they are sent, in order, inside the
// transaction, after the acknowledgement and before the commit; one that cannot be sent
// fails the delivery (the ones after it are not sent, and the message comes back). A
// failed attempt's publishes are dropped unsent (an asynchronous one's callback is told).
// A failure before the commit (a handler error, a failed write, a crash, a lost
// connection, a handler slower than timeout) aborts the transaction and the original is
// delivered again. The handler may therefore run again after an abort; side effects
// outside Pulsar need the idempotency package.
//
// Limit: pulsar-client-go v0.21.0, as v0.19.0 before it, puts the transaction id on the
// send command but not in the message's metadata, by which Apache Pulsar tells an aborted
// message (apache/pulsar-client-go#1498): a message that was sent in a transaction that is
// then aborted (the commit failing after the held publishes or the settlement's copy went
// out) is delivered once the transaction ended. Holding the handler's publishes keeps a
// failed attempt's out of it. Acknowledgements are undone as they should be.
//
// The client must be created with ClientOptions.EnableTransaction, and the broker must run
// its transaction coordinator (transactionCoordinatorEnabled=true); otherwise [NewConsumer]
// fails at once with an error matching [ErrTransactions]. A commit that fails is tried
// again while the client allows it and the transaction has not timed out, then aborted; the
// original is never acknowledged outside the transaction. timeout ≤ 0 is refused. Default:
// off (at-least-once settlement).
func WithTransactions(timeout time.Duration) ConsumerOption {
	return consumerSet(refuse(timeout <= 0, "transaction timeout %s is not positive", timeout),
		func(c *consumerConfig) { c.txnTimeout = timeout })
}

// txnAcker acknowledges inside a transaction; apulsar.Consumer implements it.
type txnAcker interface {
	AckWithTxn(msg apulsar.Message, txn apulsar.Transaction) error
}

// txnKey is the context key of a delivery's transaction (a *txnState).
type txnKey struct{}

// txnState is a delivery's transaction as its context carries it, and the publishes the
// handler made with that context, held back until the delivery is acknowledged: they are
// sent inside the transaction with the acknowledgement, before the commit, and never
// sent at all when the attempt fails. So a failed attempt's publishes are never delivered
// whatever the client does with an aborted transaction's messages.
type txnState struct {
	txn apulsar.Transaction

	mu     sync.Mutex
	closed bool // released or dropped: a publish goes out at once, inside the transaction
	held   []heldSend
}

// heldSend is a publish held back by a delivery's transaction.
type heldSend struct {
	p     *Publisher
	env   *envelope.Envelope
	po    publishOptions
	async bool
	done  func(string, error) // PublishAsync's callback (nil for none)
}

// txnContexts is set, once and for good, before the first context that carries a
// transaction is made (withTxn). Until then no context can carry one, so the look-up that
// every publish and settlement write makes (txnStateOf), a walk up the context's chain, is
// skipped. A context reaches a publish only after it was made, and so after the flag was
// set: the goroutine that publishes with it sees the flag.
var txnContexts atomic.Bool

// withTxn returns ctx carrying txn, and the state that holds the publishes made with it.
func withTxn(ctx context.Context, txn apulsar.Transaction) (context.Context, *txnState) {
	txnContexts.Store(true)
	st := &txnState{txn: txn}
	return context.WithValue(ctx, txnKey{}, st), st
}

// txnStateOf returns the transaction state ctx carries, or nil.
func txnStateOf(ctx context.Context) *txnState {
	if ctx == nil || !txnContexts.Load() {
		return nil
	}
	st, _ := ctx.Value(txnKey{}).(*txnState)
	return st
}

// txnOf returns the transaction ctx carries, or nil.
func txnOf(ctx context.Context) apulsar.Transaction {
	if st := txnStateOf(ctx); st != nil {
		return st.txn
	}
	return nil
}

// hold keeps h back, with a copy of its headers, until the delivery is acknowledged; false
// when the state no longer holds (the publish then goes out at once).
func (st *txnState) hold(h heldSend) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.closed {
		return false
	}
	if !h.po.ownHeaders {
		// Sent after the publish call returned: the caller's WithHeaders map may have
		// changed by then, so keep the headers as they were at the call.
		h.po.headers, h.po.ownHeaders = maps.Clone(h.po.headers), h.po.headers != nil
	}
	st.held = append(st.held, h)
	return true
}

// take ends the holding and returns what was held.
func (st *txnState) take() []heldSend {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.closed = true
	h := st.held
	st.held = nil
	return h
}

// sendHeld sends the publishes d's handler made, in order, inside d's transaction, after
// its acknowledgement and before the commit: with the delivery's context (ctx) and the transaction's deadline,
// whatever became of the contexts they were made with, which a handler may have cancelled on
// its way out. An asynchronous publish's callback gets its outcome. The first failure stops
// it; the publishes not sent get it too.
func (e *engine) sendHeld(ctx context.Context, d *Delivery) error {
	if d.txns == nil {
		return nil
	}
	held := d.txns.take()
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), d.txnStart.Add(e.cfg.Txns.timeout))
	defer cancel()
	for i, h := range held {
		_, err := h.p.send(sctx, h.env, &h.po)
		if h.async && h.done != nil {
			h.done(h.env.Meta.ID, err)
		}
		if err != nil {
			dropHeld(held[i+1:], fmt.Errorf("not sent: an earlier publish of the handler failed: %w", err))
			return fmt.Errorf("send the handler's publishes: %w", err)
		}
	}
	return nil
}

// dropHeldOf discards what d's handler published: the attempt did not succeed, so nothing
// of it is sent. An asynchronous publish's callback is told.
func (*engine) dropHeldOf(d *Delivery, why string) {
	if d.txns == nil {
		return
	}
	dropHeld(d.txns.take(), errors.New(why))
}

func dropHeld(held []heldSend, cause error) {
	for _, h := range held {
		if h.async && h.done != nil {
			h.done(h.env.Meta.ID, fmt.Errorf("pulsar: publish to %q: %w", h.p.topic, cause))
		}
	}
}

// transactions opens the transactions of a consumer's deliveries.
type transactions struct {
	open    func(timeout time.Duration) (apulsar.Transaction, error)
	timeout time.Duration
	acker   txnAcker
}

// newTransactions checks that client can open transactions, by opening one, and returns what opens them; [transactions.settleWith] completes it.
func newTransactions(client apulsar.Client, timeout time.Duration) (*transactions, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: WithTransactions needs a client", ErrTransactions)
	}
	// The probe's transaction holds nothing and is left to the broker, which aborts it at its
	// timeout: ending it here would need a context that NewConsumer does not take.
	if _, err := client.NewTransaction(timeout); err != nil {
		return nil, transactionsError(err)
	}
	return &transactions{open: client.NewTransaction, timeout: timeout}, nil
}

// settleWith sets the settler that acknowledges inside the transactions; an error when it
// cannot.
func (t *transactions) settleWith(settler any) error {
	acker, ok := settler.(txnAcker)
	if !ok {
		return fmt.Errorf("%w: this consumer's settlement cannot acknowledge inside a transaction", ErrTransactions)
	}
	t.acker = acker
	return nil
}

// transactionsError names what to change when the client cannot open a transaction.
func transactionsError(err error) error {
	switch {
	case errors.Is(err, apulsar.ErrClientTransactionsNotEnabled):
		return fmt.Errorf("%w: the client was created without ClientOptions.EnableTransaction: %w", ErrTransactions, err)
	case errors.Is(err, apulsar.ErrTransactionCoordinatorNotEnabled):
		return fmt.Errorf("%w: the broker runs without its transaction coordinator "+
			"(set transactionCoordinatorEnabled=true in broker.conf): %w", ErrTransactions, err)
	default:
		return fmt.Errorf("%w: cannot open a transaction: %w", ErrTransactions, err)
	}
}

// openTxn opens d's transaction and puts it in d's context; false when it could not be
// opened (the message is then negatively acknowledged and reported).
func (e *engine) openTxn(d *Delivery) bool {
	txn, err := e.cfg.Txns.open(e.cfg.Txns.timeout)
	if err != nil {
		e.cfg.Logger.Warn("cannot open the delivery's transaction; message negatively acknowledged",
			zap.String("topic", d.msg.Topic()), zap.Error(err))
		e.health.failing("transaction", err)
		e.settler.Nack(d.msg)
		e.finish(d, &Event{Kind: EventNacked, Err: &SettleError{Err: fmt.Errorf("open transaction: %w", err)}})
		return false
	}
	d.txn, d.txnStart = txn, time.Now()
	d.ctx, d.txns = withTxn(d.ctx, txn)
	return true
}

// renewTxn aborts d's transaction, discarding what the handler published in it, and opens
// the one the settlement writes and acknowledges in; false when it could not be opened (the
// message is then negatively acknowledged). A failed handler's publishes are thus never
// delivered, while its retry republish or dead-letter copy is committed together with the
// acknowledgement of the original.
func (e *engine) renewTxn(d *Delivery) bool {
	e.dropHeldOf(d, "not sent: the handler failed, so its delivery's transaction was aborted")
	e.abortTxn(d.ctx, d)
	d.txn = nil
	return e.openTxn(d)
}

// commitAck acknowledges d inside its transaction and commits it. A commit that fails is
// tried again while the client leaves the transaction open and its timeout has not passed;
// then the transaction is aborted and the message negatively acknowledged, never acked
// outside it.
func (e *engine) commitAck(d *Delivery) error {
	txn := d.txn
	// The acknowledgement first: when it fails, nothing of the handler's has been sent.
	err := e.cfg.Txns.acker.AckWithTxn(d.msg, txn)
	if err == nil {
		err = e.sendHeld(d.ctx, d)
	} else {
		e.dropHeldOf(d, "not sent: the acknowledgement inside the transaction failed")
	}
	if err == nil {
		err = e.commit(d.ctx, d)
	}
	if err != nil {
		e.abortTxn(d.ctx, d)
		e.cfg.Logger.Warn("transactional settlement failed; message negatively acknowledged",
			zap.String("topic", d.msg.Topic()), zap.Error(err))
		e.health.failing("transaction", err)
		e.settler.Nack(d.msg)
		serr := &SettleError{Err: fmt.Errorf("transaction: %w", err)}
		e.finish(d, &Event{Kind: EventNacked, Err: serr})
		return serr
	}
	e.health.ok("transaction")
	return nil
}

// commit commits d's transaction, trying again after a failure the client left the
// transaction open for (its own context ended, or a transient error), until the transaction
// times out.
//
// The delivery's context bounds nothing here: a drain that cancelled it must not leave a
// transaction half ended, so only the transaction's own deadline does.
func (e *engine) commit(ctx context.Context, d *Delivery) error {
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), d.txnStart.Add(e.cfg.Txns.timeout))
	defer cancel()
	pause := 50 * time.Millisecond
	for {
		err := d.txn.Commit(ctx)
		if err == nil {
			return nil
		}
		if d.txn.GetState() != apulsar.TxnOpen || !retry.IsRetryable(err) {
			return fmt.Errorf("commit: %w", err)
		}
		if werr := retry.Wait(ctx, pause); werr != nil {
			return fmt.Errorf("commit: %w (then the transaction's timeout passed)", err)
		}
		pause = min(2*pause, time.Second)
	}
}

// abortTxn aborts d's transaction when it is still open (a settlement that does not
// acknowledge, or a failed commit); the broker discards what the attempt wrote. An abort
// that fails is logged: the broker aborts the transaction at its timeout anyway.
func (e *engine) abortTxn(ctx context.Context, d *Delivery) {
	e.dropHeldOf(d, "not sent: the delivery's transaction was aborted")
	txn := d.txn
	if txn == nil || txn.GetState() != apulsar.TxnOpen {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.Txns.timeout)
	defer cancel()
	if err := txn.Abort(ctx); err != nil {
		e.cfg.Logger.Warn("transaction abort failed; the broker aborts it at its timeout",
			zap.String("topic", d.msg.Topic()), zap.Error(err))
	}
}
