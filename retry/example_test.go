package retry_test

import (
	"fmt"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/babelqueue/babelqueue-go-pulsar/retry"
)

func ExampleBackoff_Delay() {
	b := retry.Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Multiplier: 2}
	for i := 1; i <= 5; i++ {
		fmt.Println(b.Delay(i))
	}
	// Output:
	// 100ms
	// 200ms
	// 400ms
	// 800ms
	// 1s
}

func ExampleIsRetryable() {
	fmt.Println(retry.IsRetryable(apulsar.ErrSendTimeout))
	fmt.Println(retry.IsRetryable(apulsar.ErrMessageTooLarge))
	// Output:
	// true
	// false
}
