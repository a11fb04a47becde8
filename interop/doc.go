// Package interop holds the cross-SDK interoperability suite: its tests run the other
// BabelQueue SDKs as real, separate processes against the same broker as this SDK, and check
// what each side puts on the wire and what the other side makes of it, in both directions.
//
// The package has no code of its own. Its tests (go test ./interop/) need, besides Go, the
// peer's runtime: for the Python peer (python/peer.py), python3 with the venv module. The test
// builds a virtual environment from python/requirements.txt in the user's cache directory
// (babelqueue-interop/python-<hash of the file>), once, and reuses it while the file is
// unchanged. Without python3, venv or the packages the scenarios are skipped with the reason,
// unless INTEROP_REQUIRED=1, where they fail; -short skips them too.
//
// The scenarios run against an embedded broker (pulsartest) and, when PULSAR_URL and
// PULSAR_ADMIN_URL are set, against that real Apache Pulsar as well (brokertest.Each:
// TestInterop/python/<scenario>/embedded and …/real).
package interop
