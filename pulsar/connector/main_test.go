package connector_test

import (
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

// The transactional tests' clients leave the client's coordinator goroutines behind
// (leaktest.TxnClientGoroutines says why).
func TestMain(m *testing.M) { leaktest.VerifyTestMain(m, leaktest.TxnClientGoroutines...) }
