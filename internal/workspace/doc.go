// Package workspace runs, from the main module's `go test ./...`, the tests of the other
// modules of the repository's Go workspace (go.work at the root): today the examples module
// (examples/go.mod), which has a module of its own so that its exporters and their
// dependencies stay out of the main go.mod.
//
// The pattern ./... stops at a nested module, also in workspace mode, so without this
// package the README's `go test ./...` would skip every example. Its one test runs
// `go test ./examples/...` from the repository root with the flags the outer run was given
// (-count, -shuffle, -short, -race, the time left before -timeout) and fails with the
// nested run's output when one of those tests fails. It stats every file of the
// repository and reads the variables the examples read, so that go test's result cache
// reruns it whenever an example, or a package an example builds on, changes.
//
// It holds no code; it is a test only.
package workspace
