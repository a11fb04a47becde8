package interop_test

import (
	"testing"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/brokertest"
	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// scenario is one interop check with one peer, run on every broker target.
type scenario struct {
	group, name string
	// impossible, when set, is why the peer cannot do this at all (naming its version): the
	// scenario is skipped with that reason and is not run on any broker.
	impossible func(py *pythonPeer) string
	run        func(w *world)
}

// TestInterop runs every scenario of every peer as TestInterop/<peer>/<group>/<scenario>/<broker>.
// The peer level is the peer's name ("python"), so that `testfails -target python` tallies
// one peer's scenarios; the broker level is "embedded" or "real" (brokertest.Each).
func TestInterop(t *testing.T) {
	t.Run("python", func(t *testing.T) {
		py := pythonFor(t)
		groups := map[string][]scenario{}
		var order []string
		for _, sc := range pythonScenarios() {
			if _, ok := groups[sc.group]; !ok {
				order = append(order, sc.group)
			}
			groups[sc.group] = append(groups[sc.group], sc)
		}
		for _, g := range order {
			t.Run(g, func(t *testing.T) {
				for _, sc := range groups[g] {
					t.Run(sc.name, func(t *testing.T) {
						if sc.impossible != nil {
							t.Skip(sc.impossible(py))
						}
						brokertest.Each(t, func(t *testing.T, tg *brokertest.Target) { //nolint:thelper // the dual-target body is the subtest, not a helper
							sc.run(newWorld(t, tg, py))
						})
					})
				}
			})
		}
	})
}
