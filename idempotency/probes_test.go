package idempotency_test

import (
	"context"
	"errors"
	"strconv"

	"github.com/babelqueue/babelqueue-go-pulsar/idempotency"
)

// The probes the fault scenarios (faults_test.go) read the guard's state through.

// isLeaseLost reports whether err says that a claim's lease was lost.
func isLeaseLost(err error) bool {
	var lle *idempotency.LeaseLostError
	return errors.Is(err, idempotency.ErrLeaseLost) && errors.As(err, &lle)
}

// fenceOf returns the fence a guarded handler's ctx carries.
func fenceOf(ctx context.Context) (uint64, bool) { return idempotency.FenceFrom(ctx) }

// fenceOfClaim returns a claim's fence.
func fenceOfClaim(c idempotency.Claim) uint64 { return c.Fence }

// strconvFence returns the token of the claim with fence f, as the module's stores write it.
func strconvFence(f uint64) string { return strconv.FormatUint(f, 10) }
