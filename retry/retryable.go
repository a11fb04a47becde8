package retry

import (
	"context"
	"errors"
	"io"
	"net"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/answer"
)

// IsRetryable reports whether err is worth retrying: the same operation may succeed later
// without anyone changing the request. The rules, in order:
//
//  1. nil is not retryable (nothing failed).
//  2. [context.Canceled] is not retryable: the caller gave up.
//  3. [context.DeadlineExceeded] is retryable: the operation ran out of time. A failed
//     CreateProducer, for example, returns an errors.Join of DeadlineExceeded and a
//     connection error that is not a *apulsar.Error.
//  4. A *apulsar.Error anywhere in the chain (errors.As) decides by its Result:
//     TimeoutError (which covers apulsar.ErrSendTimeout and apulsar.ErrContextExpired),
//     LookupError, ConnectError, ReadError, BrokerMetadataError, BrokerPersistenceError,
//     NotConnectedError, TooManyLookupRequestException, ServiceUnitNotReady,
//     ProducerQueueIsFull, ProducerBlockedQuotaExceededError,
//     ProducerBlockedQuotaExceededException, ClientMemoryBufferIsFull,
//     MaxConcurrentOperationsReached and ConsumerBusy are retryable; every other result
//     (configuration, authentication, authorisation, closed producer or consumer, invalid or
//     too big message, unknown or terminated topic, schema, fencing, crypto, …) is not.
//  5. A broker's error answer that pulsar-client-go passes on as text, "server error:
//     <ServerError>: <message>" (v0.21.0, as v0.19.0 before it, reports the CommandError of
//     a Subscribe, CreateProducer or lookup so, not as a *apulsar.Error), decides by its
//     ServerError name: ServiceNotReady (the topic is being unloaded or moved: "Topic is
//     temporarily unavailable"), TooManyRequests, MetadataError and PersistenceError are
//     retryable; every other name (ConsumerBusy of an Exclusive subscription held by a live
//     consumer, AuthorizationError, TopicNotFound, IncompatibleSchema, …) is not.
//  6. io.EOF, io.ErrUnexpectedEOF and any [net.Error] (a dropped or refused connection, a
//     network timeout) are retryable.
//  7. Everything else is not retryable.
func IsRetryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var pe *apulsar.Error
	if errors.As(err, &pe) {
		return retryableResult(pe.Result())
	}
	if name, _, ok := answer.Parse(err); ok {
		return retryableServerError(name)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne)
}

func retryableResult(r apulsar.Result) bool {
	switch r {
	case apulsar.TimeoutError, apulsar.LookupError, apulsar.ConnectError, apulsar.ReadError,
		apulsar.BrokerMetadataError, apulsar.BrokerPersistenceError, apulsar.NotConnectedError,
		apulsar.TooManyLookupRequestException, apulsar.ServiceUnitNotReady,
		apulsar.ProducerQueueIsFull, apulsar.ProducerBlockedQuotaExceededError,
		apulsar.ProducerBlockedQuotaExceededException, apulsar.ClientMemoryBufferIsFull,
		apulsar.MaxConcurrentOperationsReached, apulsar.ConsumerBusy:
		return true
	default:
		return false
	}
}

func retryableServerError(name string) bool {
	switch name {
	case "ServiceNotReady", "TooManyRequests", "MetadataError", "PersistenceError":
		return true
	default:
		return false
	}
}
