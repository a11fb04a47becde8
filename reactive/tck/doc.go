// Package tck is a Go port of the Reactive Streams 1.0.4 TCK
// (reactive-streams-jvm, tck/src/main/java/org/reactivestreams/tck) for the
// interfaces of package reactive. It is called from _test.go files:
//
//	func TestMyPublisher(t *testing.T) {
//		tck.VerifyPublisher(t, tck.PublisherFactory[int]{
//			Create:       func(t *testing.T, n int64) reactive.Publisher[int] { return newMyPublisher(n) },
//			CreateFailed: func(*testing.T) reactive.Publisher[int] { return reactive.Failed[int](errBroken) },
//		}, tck.Options{})
//	}
//
// [VerifyPublisher], [VerifySubscriberWhitebox], [VerifySubscriberBlackbox]
// and [VerifyIdentityProcessor] run every test method of the Java classes
// PublisherVerification (38 tests), SubscriberWhiteboxVerification (27),
// SubscriberBlackboxVerification (26) and IdentityProcessorVerification (68)
// as sequential subtests named exactly like the Java methods, so a result maps
// 1:1 to a rule: required_* tests must pass, optional_* tests run and turn a
// failure into a skip carrying the failure text, stochastic_spec103 runs 100
// times unless [Options].SkipStochastic, and untested_* tests skip with
// "untested: rule X.Y is not verifiable without hooks into the
// implementation". Tests that need more elements than [Options].MaxElements,
// or a completion from a publisher declared endless, skip with the reason.
// Factories receive the subtest's *testing.T and clean up with t.Cleanup.
//
// # Options and environment
//
// [Options] mirrors the Java TestEnvironment and verification settings. A
// non-zero field beats the Java TCK's environment variable
// (DEFAULT_TIMEOUT_MILLIS, DEFAULT_NO_SIGNALS_TIMEOUT_MILLIS,
// DEFAULT_POLL_TIMEOUT_MILLIS_ENV, PUBLISHER_REFERENCE_GC_TIMEOUT_MILLIS),
// which beats the default. DefaultTimeout is only waited out when an expected
// signal is missing; NoSignalsTimeout is spent by every "expect nothing" step,
// so lowering it (e.g. 25 ms for in-process publishers) shortens a run most.
//
// # Harness semantics
//
// Signals reach the TCK's subscribers on the publisher's goroutines. Those
// callbacks never call t.Error: they record failures ("flop") in a
// mutex-guarded list of the subtest's environment, and the test goroutine
// checks the list after each step and once more when the subtest body
// returns; where the Java TCK calls verifyNoAsyncErrors() it checks, waits
// NoSignalsTimeout (the Java delay) and checks again. All state the callbacks touch
// is atomic or mutex-guarded, so a misbehaving publisher shows up as a failed
// check, not as a data race inside the TCK. A panic of the implementation on
// the test goroutine fails the subtest with its stack.
//
// The ManualSubscriber keeps at most 32 undelivered elements (2 × the Java
// TEST_BUFFER_SIZE) and flags the 33rd ("the publisher probably emitted more
// than expected"), as well as any signal before OnSubscribe. Whitebox and
// blackbox tests drive the subscriber under test from a manual publisher whose
// elements come from an asynchronous helper publisher built on Element(i).
//
// Every goroutine the TCK starts ends before its subtest returns: at the end of
// each subtest every subscription the TCK's subscribers received is cancelled,
// and the helper publisher's goroutines are awaited. Subscriptions of the
// implementation under test are cancelled too, so its goroutines end as soon as
// it honours Cancel.
//
// # Go substitutes for JVM mechanisms
//
//   - Rule 3.3 (Java: a ThreadLocal depth counter): one atomic depth counter
//     per test subscriber, +1 on OnNext entry, -1 on return. Rule 1.3 forbids
//     overlapping signals, so an OnNext entered while another runs is either
//     synchronous recursion or a rule 1.3 breach; both fail once the depth
//     exceeds BoundedRecursionDepth, and the message tells them apart by the
//     goroutine ids taken from the runtime.Stack header (diagnostic only).
//   - Rule 1.3, stochastic_spec103 (Java: a barrier with thread identity): an
//     in-progress goroutine id; nesting on the same goroutine passes, entry
//     from another goroutine fails.
//   - Rule 2.3 (Java: stack inspection for onComplete/onError): the TCK
//     delivers terminal signals through the //go:noinline functions
//     tckSignalOnComplete and tckSignalOnError; the TCK's Subscription walks
//     runtime.Callers and fails when a frame's function name contains a marker
//     (generic instantiations print as name[...], hence the substring match).
//     As in Java, only synchronous calls from within the signal are caught.
//   - Rule 3.13 (Java: WeakReference and System.gc): the test subscriber is a
//     heap object with pointer fields; the TCK keeps only a weak.Pointer to it,
//     drops every strong reference (its subscription is not tracked), waits
//     GCTimeout, runs runtime.GC twice and polls for DefaultTimeout. A cycle
//     subscriber↔subscription is collectable; a parked goroutine holding the
//     subscriber is not, so publishers must end or nil such fields.
//   - NullPointerException and IllegalArgumentException (rules 1.9, 2.13,
//     3.9): a recovered panic value must be an error matching
//     reactive.ErrNilArgument; OnError must carry an error matching
//     reactive.ErrNonPositiveRequest.
//   - Exception identity checks (probe.expectError) use errors.Is, so a
//     subscriber may wrap the error it forwards.
//
// # Deviations from the Java TCK
//
//   - required_spec201_blackbox_mustSignalDemandViaSubscriptionRequest: the
//     Java loop condition (i < n && sampleIsCancelled(...)) is false at i = 0
//     unless the subscriber already cancelled, so Java sends no element. This
//     port sends min(first request, 512) elements, stopping early when the
//     subscriber cancelled (checked every 10th element), then OnComplete.
//   - Optional tests: a failure becomes a skip, also for
//     optional_spec104_mustSignalOnErrorWhenFails (Java fails it). With
//     MaxSubscribers 1 the optional_spec111 tests skip at once ("publisher is
//     unicast"), and the Go-only subtest
//     go_unicast_mustRejectSecondSubscriberWithOnErrorAfterOnSubscribe checks
//     that a second subscriber gets OnSubscribe then OnError (rules 1.9, 1.11).
//   - The IdentityProcessorVerification tests that need two subscribers skip
//     when MaxSubscribers is 1 ("requires ≥ 2 subscribers ... unicast").
//   - onNext(nil) tests (rule 2.13) skip for element types without nil.
//   - The helper publisher runs one goroutine per subscription (reactive.FromFunc)
//     instead of a shared pool of 4 threads.
//   - MaxElements 0 means "default"; [NoElements] declares a publisher of no
//     elements (the Java maxElementsFromPublisher() == 0).
package tck
