package tck

import (
	"strings"
	"testing"
	"time"
)

// The meta-tests run a verification inside a softRunner, which records each
// subtest's outcome instead of reporting it, and assert that the specific
// required check fails for a fixture breaking its rule (with the expected
// message), while the unbroken fixture passes every check. Weakening a check
// makes its meta-test fail.

var metaOptions = Options{
	DefaultTimeout:   300 * time.Millisecond,
	NoSignalsTimeout: 20 * time.Millisecond,
	PollTimeout:      5 * time.Millisecond,
	GCTimeout:        20 * time.Millisecond,
}

func runMeta(t *testing.T, verify func(r runner)) *softRunner {
	t.Helper()
	root := newSoftRunner(t, "meta")
	root.exec(verify)
	return root
}

// requireOutcome checks one subtest of a meta run.
func requireFailed(t *testing.T, root *softRunner, test, contains string) {
	t.Helper()
	c := root.Child(test)
	if c == nil {
		t.Fatalf("subtest %s did not run", test)
	}
	if !c.Failed() {
		t.Fatalf("subtest %s passed (skipped=%v) but must fail for this fixture; output:\n%s", test, c.Skipped(), c.Output())
	}
	if !strings.Contains(c.Output(), contains) {
		t.Fatalf("subtest %s failed, but its output lacks %q:\n%s", test, contains, c.Output())
	}
}

// requireAllPass checks that no subtest of a meta run failed, and returns
// the number of subtests that ran.
func requireAllPass(t *testing.T, root *softRunner) (passed, skipped int) {
	t.Helper()
	if root.Failed() && len(root.children) == 0 {
		t.Fatalf("verification failed before any subtest: %s", root.Output())
	}
	for _, c := range root.children {
		switch {
		case c.Failed():
			t.Errorf("subtest %s failed for a correct fixture:\n%s", c.name, c.Output())
		case c.Skipped():
			skipped++
		default:
			passed++
		}
	}
	return passed, skipped
}

func TestMetaCorrectFixturesPass(t *testing.T) {
	t.Parallel()
	t.Run("publisher", func(t *testing.T) {
		t.Parallel()
		root := runMeta(t, func(r runner) { verifyPublisher(r, flawedFactory(pubFlaws{}), metaOptions) })
		passed, skipped := requireAllPass(t, root)
		if passed != 31 || skipped != 7 {
			t.Fatalf("want 31 passed (22 required, 8 optional, 1 stochastic) and 7 untested skips, got %d passed, %d skipped", passed, skipped)
		}
	})
	t.Run("whitebox", func(t *testing.T) {
		t.Parallel()
		root := runMeta(t, func(r runner) { verifyWhitebox(r, whiteboxFactory(subFlaws{}), metaOptions) })
		if passed, skipped := requireAllPass(t, root); passed != 14 || skipped != 13 {
			t.Fatalf("want 14 passed and 13 untested skips, got %d passed, %d skipped", passed, skipped)
		}
	})
	t.Run("blackbox", func(t *testing.T) {
		t.Parallel()
		root := runMeta(t, func(r runner) { verifyBlackbox(r, blackboxFactory(subFlaws{}), metaOptions) })
		if passed, skipped := requireAllPass(t, root); passed != 11 || skipped != 15 {
			t.Fatalf("want 11 passed and 15 untested skips, got %d passed, %d skipped", passed, skipped)
		}
	})
	t.Run("multicast processor", func(t *testing.T) {
		t.Parallel()
		root := runMeta(t, func(r runner) { verifyProcessor(r, multicastFactory(false, false), metaOptions) })
		passed, skipped := requireAllPass(t, root)
		for _, name := range []string{
			"required_spec104_mustCallOnErrorOnAllItsSubscribersIfItEncountersANonRecoverableError",
			"required_mustRequestFromUpstreamForElementsThatHaveBeenRequestedLongAgo",
		} {
			if c := root.Child(name); c == nil || c.Skipped() || c.Failed() {
				t.Fatalf("%s must run and pass for a multicast processor", name)
			}
		}
		if passed+skipped != 68 {
			t.Fatalf("want the 68 Java tests, got %d passed, %d skipped", passed, skipped)
		}
	})
	t.Run("processor", func(t *testing.T) {
		t.Parallel()
		o := metaOptions
		o.MaxSubscribers = 1
		root := runMeta(t, func(r runner) { verifyProcessor(r, processorFactory(false), o) })
		passed, skipped := requireAllPass(t, root)
		// 68 Java tests + go_unicast; skipped: 7 + 13 untested, 5 optional 1.11, 2 two-subscriber tests
		if passed+skipped != 69 || skipped != 27 {
			t.Fatalf("want 69 subtests with 27 skips, got %d passed, %d skipped", passed, skipped)
		}
	})
}

func TestMetaPublisherChecksCatchViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		flaw     pubFlaws
		test     string
		contains string
	}{
		{
			"emits without demand",
			pubFlaws{ignoreDemand: true},
			"required_spec101_subscriptionRequestMustResultInTheCorrectNumberOfProducedElements", "produced value before the first `request`",
		},
		{
			"emits more than demand after cancel",
			pubFlaws{ignoreDemand: true},
			"required_spec312_cancelMustMakeThePublisherToEventuallyStopSignaling", "more than the signalled demand",
		},
		{
			"one element too many",
			pubFlaws{extraElement: true},
			"required_createPublisher1MustProduceAStreamOfExactly1Element", "expected end-of-stream but got element",
		},
		{
			"three elements then one more",
			pubFlaws{extraElement: true},
			"required_createPublisher3MustProduceAStreamOfExactly3Elements", "expected end-of-stream but got element",
		},
		{
			"never completes",
			pubFlaws{neverComplete: true},
			"required_spec102_maySignalLessThanRequestedAndTerminateSubscription", "did not receive expected stream completion",
		},
		{
			"never completes (1.5)",
			pubFlaws{neverComplete: true},
			"required_spec105_mustSignalOnCompleteWhenFiniteStreamTerminates", "did not receive expected stream completion",
		},
		{
			"signals after complete",
			pubFlaws{signalAfterComplete: true},
			"required_spec107_mustNotEmitFurtherSignalsOnceOnCompleteHasBeenSignalled", "received after stream completed",
		},
		{
			"subscribe(nil) returns",
			pubFlaws{noNilPanic: true},
			"required_spec109_subscribeThrowNPEOnNullSubscriber", "did not panic",
		},
		{
			"double onSubscribe",
			pubFlaws{doubleOnSubscribe: true},
			"required_spec109_mustIssueOnSubscribeForNonNullSubscriber", "only one onSubscribe call expected",
		},
		{
			"rejects without onSubscribe",
			pubFlaws{failWithoutSubscribe: true},
			"required_spec109_mayRejectCallsToSubscribeIfPublisherIsUnableOrUnwillingToServeThemRejectionMustTriggerOnErrorAfterOnSubscribe",
			"onSubscribe should be called prior to onError always",
		},
		{
			"unbounded recursion",
			pubFlaws{recursive: true},
			"required_spec303_mustNotAllowUnboundedRecursion", "synchronous recursion (rule 3.3)",
		},
		{
			"concurrent onNext (depth)",
			pubFlaws{concurrent: true},
			"required_spec303_mustNotAllowUnboundedRecursion", "concurrent OnNext from goroutine",
		},
		{
			"concurrent onNext (1.3)",
			pubFlaws{concurrent: true},
			"stochastic_spec103_mustSignalOnMethodsSequentially", "illegal concurrent access detected",
		},
		{
			"no request from onNext",
			pubFlaws{noReentrantRequest: true},
			"required_spec302_mustAllowSynchronousRequestCallsFromOnNextAndOnSubscribe", "request from within onNext is not supported",
		},
		{
			"second cancel panics",
			pubFlaws{panicOnSecondCancel: true},
			"required_spec307_afterSubscriptionIsCancelledAdditionalCancelationsMustBeNops", "subscription already cancelled",
		},
		{
			"requests after cancel emit",
			pubFlaws{ignoreCancel: true},
			"required_spec306_afterSubscriptionIsCancelledRequestMustBeNops", "did not expect an element but got element",
		},
		{
			"ignores request(0)",
			pubFlaws{ignore39: true},
			"required_spec309_requestZeroMustSignalIllegalArgumentException", "expected onError(ErrNonPositiveRequest)",
		},
		{
			"ignores request(-n)",
			pubFlaws{ignore39: true},
			"required_spec309_requestNegativeNumberMustSignalIllegalArgumentException", "expected onError(ErrNonPositiveRequest)",
		},
		{
			"keeps the subscriber",
			pubFlaws{retainSubscriber: true},
			"required_spec313_cancelMustMakeThePublisherEventuallyDropAllReferencesToTheSubscriber", "did not drop reference to test subscriber",
		},
		{
			"32-bit demand (cumulative)",
			pubFlaws{int32Demand: true},
			"required_spec317_mustSupportACumulativePendingElementCountUpToLongMaxValue", "did not receive expected element or completion",
		},
		{
			"32-bit demand (MaxInt64)",
			pubFlaws{int32Demand: true},
			"required_spec317_mustSupportAPendingElementCountUpToLongMaxValue", "did not receive expected element or completion",
		},
		{
			"errors above MaxInt64",
			pubFlaws{errorAboveMax: true},
			"required_spec317_mustNotSignalOnErrorWhenPendingAboveLongMaxValue", "pending demand above MaxInt64",
		},
		{
			"demand wraps above MaxInt64",
			pubFlaws{wrapDemand: true},
			"required_spec317_mustNotSignalOnErrorWhenPendingAboveLongMaxValue", "stopped delivering after pending demand exceeded MaxInt64",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := runMeta(t, func(r runner) { verifyPublisher(r, flawedFactory(tc.flaw), metaOptions, tc.test) })
			requireFailed(t, root, tc.test, tc.contains)
		})
	}
}

func TestMetaOptionalFailureSkips(t *testing.T) {
	t.Parallel()
	const test = "optional_spec105_emptyStreamMustTerminateBySignallingOnComplete"
	root := runMeta(t, func(r runner) { verifyPublisher(r, flawedFactory(pubFlaws{neverComplete: true}), metaOptions, test) })
	c := root.Child(test)
	if c == nil || c.Failed() || !c.Skipped() {
		t.Fatalf("an optional failure must skip, not fail: %+v", c)
	}
	if !strings.Contains(c.Output(), "optional rule 1.5: empty stream not supported") {
		t.Fatalf("skip reason missing: %s", c.Output())
	}
}

func TestMetaValidationOptions(t *testing.T) {
	t.Parallel()
	o := metaOptions
	o.MaxElements = -5
	o.BoundedRecursionDepth = -1
	root := runMeta(t, func(r runner) {
		verifyPublisher(r, flawedFactory(pubFlaws{}), o,
			"required_validate_maxElementsFromPublisher", "required_validate_boundedDepthOfOnNextAndRequestRecursion")
	})
	requireFailed(t, root, "required_validate_maxElementsFromPublisher", "MaxElements must be >= 0")
	requireFailed(t, root, "required_validate_boundedDepthOfOnNextAndRequestRecursion", "BoundedRecursionDepth must be >= 1")
}

func TestMetaWhiteboxChecksCatchViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		flaw     subFlaws
		test     string
		contains string
	}{
		{
			"ignores demand trigger",
			subFlaws{neverRequest: true},
			"required_spec201_mustSignalDemandViaSubscriptionRequest", "did not receive expected `request` call",
		},
		{
			"ignores demand trigger (happy path)",
			subFlaws{neverRequest: true},
			"required_exerciseWhiteboxHappyPath", "did not receive expected `request` call",
		},
		{
			"requests in onComplete",
			subFlaws{requestInOnComplete: true},
			"required_spec203_mustNotCallMethodsOnSubscriptionOrPublisherInOnComplete", "MUST NOT be called from Subscriber::onComplete (Rule 2.3)",
		},
		{
			"requests in onError",
			subFlaws{requestInOnError: true},
			"required_spec203_mustNotCallMethodsOnSubscriptionOrPublisherInOnError", "MUST NOT be called from Subscriber::onError (Rule 2.3)",
		},
		{
			"keeps a second subscription",
			subFlaws{keepSecondSubscription: true},
			"required_spec205_mustCallSubscriptionCancelIfItAlreadyHasAnSubscriptionAndReceivesAnotherOnSubscribeSignal", "was not called",
		},
		{
			"panics on onNext after cancel",
			subFlaws{panicOnNextAfterCancel: true},
			"required_spec208_mustBePreparedToReceiveOnNextSignalsAfterHavingCalledSubscriptionCancel", "onNext after cancel",
		},
		{
			"drops the completion",
			subFlaws{dropComplete: true},
			"required_spec209_mustBePreparedToReceiveAnOnCompleteSignalWithPrecedingRequestCall", "did not call `registerOnComplete()`",
		},
		{
			"panics on early onComplete",
			subFlaws{panicOnEarlyComplete: true},
			"required_spec209_mustBePreparedToReceiveAnOnCompleteSignalWithoutPrecedingRequestCall", "completed before any request",
		},
		{
			"drops errors",
			subFlaws{dropError: true},
			"required_spec210_mustBePreparedToReceiveAnOnErrorSignalWithPrecedingRequestCall", "did not call `registerOnError",
		},
		{
			"drops errors (no request)",
			subFlaws{dropError: true},
			"required_spec210_mustBePreparedToReceiveAnOnErrorSignalWithoutPrecedingRequestCall", "did not call `registerOnError",
		},
		{
			"onSubscribe(nil) returns",
			subFlaws{noNilPanicOnSubscribe: true},
			"required_spec213_onSubscribe_mustThrowNullPointerExceptionWhenParametersAreNull", "onSubscribe(nil) did not panic",
		},
		{
			"onNext(nil) returns",
			subFlaws{noNilPanicOnNext: true},
			"required_spec213_onNext_mustThrowNullPointerExceptionWhenParametersAreNull", "onNext(nil) did not panic",
		},
		{
			"onError(nil) returns",
			subFlaws{noNilPanicOnError: true},
			"required_spec213_onError_mustThrowNullPointerExceptionWhenParametersAreNull", "onError(nil) did not panic",
		},
		{
			"reports elements twice",
			subFlaws{doubleRegister: true},
			"required_spec308_requestMustRegisterGivenNumberElementsToBeProduced", "rather than `registerOnNext",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := runMeta(t, func(r runner) { verifyWhitebox(r, whiteboxFactory(tc.flaw), metaOptions, tc.test) })
			requireFailed(t, root, tc.test, tc.contains)
		})
	}
}

func TestMetaBlackboxChecksCatchViolations(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		flaw     subFlaws
		test     string
		contains string
	}{
		{
			"never requests",
			subFlaws{neverRequest: true},
			"required_spec201_blackbox_mustSignalDemandViaSubscriptionRequest", "did not receive expected `request` call",
		},
		{
			"requests in onComplete",
			subFlaws{requestInOnComplete: true},
			"required_spec203_blackbox_mustNotCallMethodsOnSubscriptionOrPublisherInOnComplete", "(Rule 2.3)",
		},
		{
			"requests in onError",
			subFlaws{requestInOnError: true},
			"required_spec203_blackbox_mustNotCallMethodsOnSubscriptionOrPublisherInOnError", "(Rule 2.3)",
		},
		{
			"uses a second subscription",
			subFlaws{keepSecondSubscription: true},
			"required_spec205_blackbox_mustCallSubscriptionCancelIfItAlreadyHasAnSubscriptionAndReceivesAnotherOnSubscribeSignal", "illegally called `subscription.request",
		},
		{
			"panics on onComplete",
			subFlaws{panicOnComplete: true},
			"required_spec209_blackbox_mustBePreparedToReceiveAnOnCompleteSignalWithPrecedingRequestCall", "cannot handle onComplete",
		},
		{
			"panics on onComplete before request",
			subFlaws{panicOnEarlyComplete: true, neverRequest: true},
			"required_spec209_blackbox_mustBePreparedToReceiveAnOnCompleteSignalWithoutPrecedingRequestCall", "completed before any request",
		},
		{
			"panics on onError",
			subFlaws{panicOnError: true},
			"required_spec210_blackbox_mustBePreparedToReceiveAnOnErrorSignalWithoutPrecedingRequestCall", "cannot handle onError",
		},
		{
			"panics on onError after request",
			subFlaws{panicOnError: true},
			"required_spec210_blackbox_mustBePreparedToReceiveAnOnErrorSignalWithPrecedingRequestCall", "cannot handle onError",
		},
		{
			"onSubscribe(nil) returns",
			subFlaws{noNilPanicOnSubscribe: true},
			"required_spec213_blackbox_onSubscribe_mustThrowNullPointerExceptionWhenParametersAreNull", "onSubscribe(nil) did not panic",
		},
		{
			"onNext(nil) returns",
			subFlaws{noNilPanicOnNext: true},
			"required_spec213_blackbox_onNext_mustThrowNullPointerExceptionWhenParametersAreNull", "onNext(nil) did not panic",
		},
		{
			"onError(nil) returns",
			subFlaws{noNilPanicOnError: true},
			"required_spec213_blackbox_onError_mustThrowNullPointerExceptionWhenParametersAreNull", "onError(nil) did not panic",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			root := runMeta(t, func(r runner) { verifyBlackbox(r, blackboxFactory(tc.flaw), metaOptions, tc.test) })
			requireFailed(t, root, tc.test, tc.contains)
		})
	}
}

func TestMetaProcessorChecksCatchViolations(t *testing.T) {
	t.Parallel()
	t.Run("error waits for demand", func(t *testing.T) {
		t.Parallel()
		o := metaOptions
		o.MaxSubscribers = 1
		const test = "mustImmediatelyPassOnOnErrorEventsReceivedFromItsUpstreamToItsDownstream"
		root := runMeta(t, func(r runner) { verifyProcessor(r, processorFactory(true), o, test) })
		requireFailed(t, root, test, "did not receive expected error on downstream")
	})
	t.Run("error reaches one subscriber", func(t *testing.T) {
		t.Parallel()
		const test = "required_spec104_mustCallOnErrorOnAllItsSubscribersIfItEncountersANonRecoverableError"
		root := runMeta(t, func(r runner) { verifyProcessor(r, multicastFactory(true, false), metaOptions, test) })
		requireFailed(t, root, test, "did not receive expected error on downstream")
	})
	t.Run("late subscriber loses elements", func(t *testing.T) {
		t.Parallel()
		const test = "required_mustRequestFromUpstreamForElementsThatHaveBeenRequestedLongAgo"
		root := runMeta(t, func(r runner) { verifyProcessor(r, multicastFactory(false, true), metaOptions, test) })
		requireFailed(t, root, test, "timeout while awaiting")
	})
}

// TestMetaRealHarness runs correct fixtures through the public entry points
// with a real *testing.T.
func TestMetaRealHarness(t *testing.T) {
	t.Parallel()
	o := metaOptions
	t.Run("VerifyPublisher", func(t *testing.T) {
		t.Parallel()
		VerifyPublisher(t, flawedFactory(pubFlaws{}), o)
	})
	t.Run("VerifySubscriberWhitebox", func(t *testing.T) {
		t.Parallel()
		VerifySubscriberWhitebox(t, whiteboxFactory(subFlaws{}), o)
	})
	t.Run("VerifySubscriberBlackbox", func(t *testing.T) {
		t.Parallel()
		VerifySubscriberBlackbox(t, blackboxFactory(subFlaws{}), o)
	})
	t.Run("VerifyIdentityProcessor", func(t *testing.T) {
		t.Parallel()
		po := o
		po.MaxSubscribers = 1
		VerifyIdentityProcessor(t, processorFactory(false), po)
	})
}
