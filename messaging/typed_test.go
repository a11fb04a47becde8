package messaging_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
)

type typedOrder struct{ ID string }

type typedInvoice struct{ Order string }

func TestTyped_PipelineAndRegistrationSite(t *testing.T) {
	rt, _ := newRuntime(t, nil)
	orders := messaging.ChannelOf[typedOrder]("orders")
	invoices := messaging.ChannelOf[typedInvoice]("invoices")
	assert.Equal(t, "orders", orders.Name())
	em := messaging.NewEmitterOn(rt, orders)
	messaging.ProcessOn(rt, orders, invoices, func(_ context.Context, o typedOrder) (typedInvoice, error) {
		return typedInvoice{Order: o.ID}, nil
	}, messaging.WithAck(messaging.AckManual)) // invalid for Process: shows the registration site
	got, f := collect[typedInvoice](1)
	messaging.ConsumeOn(rt, invoices, f)
	err := rt.Start(testCtx(t))
	var ae *messaging.AssemblyError
	require.ErrorAs(t, err, &ae)
	require.Len(t, ae.Problems, 1)
	assert.Contains(t, ae.Problems[0].Stage, "Process(orders→invoices) at typed_test.go:", "the site is the caller of ProcessOn")
	_ = em
	_ = got

	rt2, _ := newRuntime(t, nil)
	em2 := messaging.NewEmitterOn(rt2, orders)
	messaging.ProcessOn(rt2, orders, invoices, func(_ context.Context, o typedOrder) (typedInvoice, error) { return typedInvoice{Order: o.ID}, nil })
	got2, f2 := collect[typedInvoice](1)
	messaging.ConsumeOn(rt2, invoices, f2)
	start(t, rt2)
	require.NoError(t, em2.Send(testCtx(t), typedOrder{ID: "42"}))
	assert.Equal(t, []typedInvoice{{Order: "42"}}, receive(t, got2, 1))
}

// A payload type mismatch between two stages declared with typed handles
// does not compile; the same program with matching types does. The
// programs are type-checked by go build through an overlay (nothing is
// written into the module).
func TestTyped_MismatchIsACompileError(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	const prog = `package typecheck

import (
	"context"

	"github.com/babelqueue/babelqueue-go-pulsar/messaging"
)

type Order struct{ ID string }
type Invoice struct{ Order string }

func Wire(rt *messaging.Runtime) {
	orders := messaging.ChannelOf[Order]("orders")
	invoices := messaging.ChannelOf[Invoice]("invoices")
	messaging.ProcessOn(rt, orders, invoices, func(_ context.Context, o Order) (Invoice, error) { return Invoice{Order: o.ID}, nil })
	messaging.ConsumeOn(rt, invoices, func(_ context.Context, v CONSUMED) error { return nil })
}
`
	check := func(t *testing.T, consumed string) (string, error) {
		t.Helper()
		dir := t.TempDir()
		src := filepath.Join(dir, "typecheck.go")
		require.NoError(t, os.WriteFile(src, []byte(strings.Replace(prog, "CONSUMED", consumed, 1)), 0o600))
		wd, err := os.Getwd()
		require.NoError(t, err)
		target := filepath.Join(wd, "zz_typecheck_overlay", "typecheck.go")
		overlay, err := json.Marshal(map[string]map[string]string{"Replace": {target: src}})
		require.NoError(t, err)
		ov := filepath.Join(dir, "overlay.json")
		require.NoError(t, os.WriteFile(ov, overlay, 0o600))
		cmd := exec.CommandContext(testCtx(t), "go", "build", "-overlay", ov, "-o", os.DevNull, "./zz_typecheck_overlay")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := check(t, "Invoice")
	require.NoError(t, err, "matching types must compile: %s", out)
	out, err = check(t, "Order")
	require.Error(t, err, "a mismatch must not compile")
	assert.Contains(t, out, "typecheck.go")
	assert.Contains(t, out, "does not match inferred type")
}
