package doccheck

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxPulsarNames bounds the exported names of package pulsar as go doc -all lists them
// (types, functions, methods of exported types, constants and variables). Issue 23 brought
// the surface from 172 names down to this; a new name takes the place of one that goes, or
// raises the bound in a commit that says why the users need it. Issue 25 added two:
// WithTransactions and ErrTransactions, exactly-once settlement and its refusal. Issue 26
// added two: ConsumerInfo and ConsumerInfoFrom, the subscription a tracing sampler needs
// at the consumer span's start, before any event names it. The move to pulsar-client-go
// v0.21.0 added one: ErrConsumerLost, so that a user's hook or probe can tell the client's
// giving a consumer up (which the consumer repairs by subscribing again) from other errors.
const maxPulsarNames = 176

// TestPulsarSurfaceStaysSmall counts the exported names of package pulsar.
func TestPulsarSurfaceStaysSmall(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "pulsar", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/babelqueue/babelqueue-go-pulsar/pulsar")
	if err != nil {
		t.Fatal(err)
	}
	n := len(p.Funcs)
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			n += len(v.Names)
		}
	}
	values(p.Consts)
	values(p.Vars)
	for _, ty := range p.Types {
		n += 1 + len(ty.Funcs) + len(ty.Methods)
		values(ty.Consts)
		values(ty.Vars)
	}
	t.Logf("package pulsar exports %d names (bound %d)", n, maxPulsarNames)
	if n > maxPulsarNames {
		t.Errorf("package pulsar exports %d names, over the bound of %d: unexport one, or raise the bound with the reason", n, maxPulsarNames)
	}
}
