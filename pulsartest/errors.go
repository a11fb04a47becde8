package pulsartest

import (
	"errors"

	"github.com/babelqueue/babelqueue-go-pulsar/pulsartest/internal/wire"
)

// ServerError is a Pulsar wire error code, as sent in ERROR and SEND_ERROR.
type ServerError int32

// Server error codes used by the fault hooks and the broker's answers.
const (
	UnknownError          = ServerError(wire.ServerError_UnknownError)
	MetadataError         = ServerError(wire.ServerError_MetadataError)
	PersistenceError      = ServerError(wire.ServerError_PersistenceError)
	ConsumerBusy          = ServerError(wire.ServerError_ConsumerBusy)
	ServiceNotReady       = ServerError(wire.ServerError_ServiceNotReady)
	ChecksumError         = ServerError(wire.ServerError_ChecksumError)
	TopicNotFound         = ServerError(wire.ServerError_TopicNotFound)
	SubscriptionNotFound  = ServerError(wire.ServerError_SubscriptionNotFound)
	ConsumerNotFoundError = ServerError(wire.ServerError_ConsumerNotFound)
	TooManyRequests       = ServerError(wire.ServerError_TooManyRequests)
	TopicTerminatedError  = ServerError(wire.ServerError_TopicTerminatedError)
	ProducerBusy          = ServerError(wire.ServerError_ProducerBusy)
	InvalidTopicName      = ServerError(wire.ServerError_InvalidTopicName)
	IncompatibleSchema    = ServerError(wire.ServerError_IncompatibleSchema)
	ConsumerAssignError   = ServerError(wire.ServerError_ConsumerAssignError)
	NotAllowedError       = ServerError(wire.ServerError_NotAllowedError)
	ProducerFenced        = ServerError(wire.ServerError_ProducerFenced)
	AuthenticationError   = ServerError(wire.ServerError_AuthenticationError)
	AuthorizationError    = ServerError(wire.ServerError_AuthorizationError)
	UnsupportedVersion    = ServerError(wire.ServerError_UnsupportedVersionError)
	ProducerQuotaExceeded = ServerError(wire.ServerError_ProducerBlockedQuotaExceededException)
	// ProducerQuotaExceededError refuses a producer under producer_request_hold (ProducerQuotaExceeded:
	// producer_exception).
	ProducerQuotaExceededError = ServerError(wire.ServerError_ProducerBlockedQuotaExceededError)
)

// String returns the wire name of the error code.
func (e ServerError) String() string { return wire.ServerError(e).String() }

func (e ServerError) wire() *wire.ServerError { v := wire.ServerError(e); return &v }

// Sentinel errors of the admin API.
var (
	// ErrClosed is returned by operations on a closed broker.
	ErrClosed = errors.New("pulsartest: broker closed")
	// ErrTopicExists is returned when creating a topic that already exists.
	ErrTopicExists = errors.New("pulsartest: topic already exists")
	// ErrTopicNotFound is returned for operations on an unknown topic.
	ErrTopicNotFound = errors.New("pulsartest: topic not found")
	// ErrInvalidTopic is returned for a malformed topic name or partition count.
	ErrInvalidTopic = errors.New("pulsartest: invalid topic")
	// ErrTopicBusy is returned when deleting a topic that still has producers or consumers.
	ErrTopicBusy = errors.New("pulsartest: topic has connected producers or consumers")
)

// busyError is ErrTopicBusy with the number of producers and consumers connected to the topic, which the admin
// API's answer names as Pulsar's does.
type busyError struct {
	topic string
	usage int
}

func (e *busyError) Error() string { return ErrTopicBusy.Error() + ": " + e.topic }

func (*busyError) Unwrap() error { return ErrTopicBusy }
