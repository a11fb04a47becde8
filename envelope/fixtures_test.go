package envelope_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// conformanceDir is the canonical cross-SDK suite, checked out beside the repository
// (../shared/babelqueue-conformance from the repository root).
var conformanceDir = filepath.Join("..", "..", "shared", "babelqueue-conformance")

type manifest struct {
	SchemaVersion int `json:"schema_version"`
	Cases         []struct {
		Name   string `json:"name"`
		File   string `json:"file"`
		Valid  bool   `json:"valid"`
		Expect struct {
			URN           string          `json:"urn"`
			Data          json.RawMessage `json:"data"`
			Attempts      int             `json:"attempts"`
			Lang          string          `json:"lang"`
			SchemaVersion int             `json:"schema_version"`
			DeadLetter    *struct {
				Reason        string `json:"reason"`
				OriginalQueue string `json:"original_queue"`
			} `json:"dead_letter"`
		} `json:"expect"`
	} `json:"cases"`
}

func loadManifest(tb testing.TB) *manifest {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(conformanceDir, "manifest.json"))
	if os.IsNotExist(err) {
		tb.Skipf("conformance suite not found at %s: check out BabelQueue/conformance there to run the fixture cases", conformanceDir)
	}
	require.NoError(tb, err)
	var m manifest
	require.NoError(tb, json.Unmarshal(b, &m))
	require.Equal(tb, envelope.SchemaVersion, m.SchemaVersion, "manifest schema version differs from the codec's")
	return &m
}

// fixturePayloads returns the canonical fixtures by name, or nil when the suite is absent.
func fixturePayloads(tb testing.TB) map[string][]byte {
	tb.Helper()
	dir := filepath.Join(conformanceDir, "fixtures")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make(map[string][]byte, len(entries))
	for _, de := range entries {
		b, err := os.ReadFile(filepath.Join(dir, de.Name()))
		require.NoError(tb, err)
		out[de.Name()] = b
	}
	return out
}

func TestConformanceCases(t *testing.T) {
	t.Parallel()
	m := loadManifest(t)
	require.NotEmpty(t, m.Cases)
	for _, c := range m.Cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			payload, err := os.ReadFile(filepath.Join(conformanceDir, filepath.FromSlash(c.File)))
			require.NoError(t, err)
			e, err := envelope.Classify(payload)
			if !c.Valid {
				require.ErrorIs(t, err, envelope.ErrPoison)
				assert.Nil(t, e)
				return
			}
			require.NoError(t, err)
			x := c.Expect
			assert.Equal(t, x.URN, e.URN())
			assert.JSONEq(t, string(x.Data), string(e.Data))
			assert.Equal(t, x.Attempts, e.Attempts)
			assert.Equal(t, x.Lang, e.Meta.Lang)
			assert.Equal(t, x.SchemaVersion, e.Meta.SchemaVersion)
			if x.DeadLetter != nil {
				require.NotNil(t, e.DeadLetter)
				assert.Equal(t, x.DeadLetter.Reason, string(e.DeadLetter.Reason))
				assert.Equal(t, x.DeadLetter.OriginalQueue, e.DeadLetter.OriginalQueue)
			}

			// Round trip: canonical re-encode is acceptable, equal, and a fixed point.
			out, err := e.Encode()
			require.NoError(t, err)
			back, err := envelope.Classify(out)
			require.NoError(t, err)
			if envelope.IsBlank(e.Job) {
				assert.Equal(t, e.URN(), back.Job, "a blank job is written as the resolved urn")
				e.Job = back.Job
			}
			assert.Equal(t, e, back)
			again, err := back.Encode()
			require.NoError(t, err)
			assert.Equal(t, string(out), string(again))

			var viaStd, viaOurs map[string]any
			require.NoError(t, json.Unmarshal(payload, &viaStd))
			require.NoError(t, json.Unmarshal(out, &viaOurs))
			if _, ok := viaStd["job"]; !ok {
				viaStd["job"] = e.URN()
			}
			assert.Equal(t, viaStd, viaOurs, "re-encoding changes no value")
		})
	}
}

func TestConformanceByteIdentity(t *testing.T) {
	t.Parallel()
	fx := fixturePayloads(t)
	if fx == nil {
		t.Skipf("conformance fixtures not found under %s", conformanceDir)
	}
	payload := fx["order-created.json"]
	require.NotNil(t, payload)
	made, err := envelope.Make("urn:babel:orders:created", map[string]any{"order_id": 1042},
		envelope.WithQueue("orders"),
		envelope.WithTraceID("7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b"),
		envelope.WithMessageID("f1e2d3c4-b5a6-4789-90ab-cdef01234567"),
	)
	require.NoError(t, err)
	made.Meta.Lang = "php"
	made.Meta.CreatedAt = 1749132727000
	got, err := made.Encode()
	require.NoError(t, err)
	decoded, err := envelope.Decode(payload)
	require.NoError(t, err)
	want, err := decoded.Encode()
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "a made envelope lays out the frame like the decoded fixture")
}
