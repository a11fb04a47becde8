package pulsar_test

import (
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

// TestMain checks for leaked goroutines; this package's tests create clients with
// transactions enabled (transactions_test.go).
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m, leaktest.TxnClientGoroutines...) }
