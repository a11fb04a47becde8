package conformance_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/conformance"
)

// loadManifest writes a suite with the given blocks and loads it.
func loadManifest(t *testing.T, blocks string) *conformance.Suite {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"),
		[]byte(`{"schema_version": 1, `+blocks+`}`), 0o600))
	s, err := conformance.Load(dir)
	require.NoError(t, err)
	return s
}

func statuses(s *conformance.Suite) map[string]conformance.Status {
	out := map[string]conformance.Status{}
	for _, r := range s.Results() {
		out[r.Name()] = r.Status
	}
	return out
}

// TestIdempotencyBlockCanFail: expectations the guard does not meet are failures.
func TestIdempotencyBlockCanFail(t *testing.T) {
	s := loadManifest(t, `"idempotency": {"sequences": {"cases": [
		{"name": "skip-first", "deliveries": [{"meta_id": "a", "expect_effect": "skip"}], "expected_effects": 0},
		{"name": "run-twice", "deliveries": [
			{"meta_id": "a", "expect_effect": "run", "outcome": "ok"},
			{"meta_id": "a", "expect_effect": "run", "outcome": "ok"}], "expected_effects": 2},
		{"name": "throw-marks", "deliveries": [
			{"meta_id": "a", "expect_effect": "run", "outcome": "throw"},
			{"meta_id": "a", "expect_effect": "skip"}], "expected_effects": 0},
		{"name": "wrong-count", "deliveries": [{"meta_id": "a", "expect_effect": "run", "outcome": "ok"}], "expected_effects": 2},
		{"name": "new-field", "deliveries": [{"meta_id": "a", "expect_effect": "run", "lease": 3}], "expected_effects": 1},
		{"name": "good", "deliveries": [
			{"meta_id": "a", "expect_effect": "run", "outcome": "ok"},
			{"meta_id": "a", "expect_effect": "skip"}], "expected_effects": 1}
	]}, "new_member": {}}`)
	got := statuses(s)
	for _, name := range []string{"skip-first", "run-twice", "throw-marks", "wrong-count", "new-field"} {
		assert.Equal(t, conformance.StatusFail, got["idempotency.sequences/"+name], name)
	}
	assert.Equal(t, conformance.StatusPass, got["idempotency.sequences/good"])
	assert.Equal(t, conformance.StatusUnknown, got["idempotency.new_member"])
}

// TestPayloadSchemaBlockCanFail: a verdict the validator does not give is a failure.
func TestPayloadSchemaBlockCanFail(t *testing.T) {
	s := loadManifest(t, `"payload_schema": {
		"schema": {"type": "object", "required": ["order_id"]},
		"cases": [
			{"name": "says-valid", "valid": true, "data": {}},
			{"name": "says-invalid", "valid": false, "data": {"order_id": 1}},
			{"name": "good", "valid": false, "data": {"amount": 1}},
			{"name": "new-field", "valid": true, "data": {"order_id": 1}, "strict": true}
		]}`)
	got := statuses(s)
	assert.Equal(t, conformance.StatusFail, got["payload_schema/says-valid"])
	assert.Equal(t, conformance.StatusFail, got["payload_schema/says-invalid"])
	assert.Equal(t, conformance.StatusPass, got["payload_schema/good"])
	assert.Equal(t, conformance.StatusUnknown, got["payload_schema/new-field"])

	bad := statuses(loadManifest(t, `"payload_schema": {"schema": {"type": 5}, "cases": []}`))
	assert.Equal(t, conformance.StatusFail, bad["payload_schema"], "a schema that does not compile fails the block")
}
