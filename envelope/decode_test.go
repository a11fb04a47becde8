package envelope_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/envelope"
)

// minimal is an acceptable body; tests append members to it (a duplicate key overrides).
const minimal = `{"job":"urn:babel:orders:created","trace_id":"t-1","data":{},"meta":{"schema_version":1}`

func body(extra string) []byte { return []byte(minimal + extra + "}") }

func readTestdata(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	return b
}

// assertCanonical compares bytes, not JSON values: the canonical layout is the point.
func assertCanonical(t *testing.T, want string, got []byte, msgAndArgs ...any) {
	t.Helper()
	assert.Equal(t, want, string(got), msgAndArgs...)
}

func requirePoison(t *testing.T, err error, rule envelope.Rule, pointer string) {
	t.Helper()
	require.Error(t, err)
	require.ErrorIs(t, err, envelope.ErrPoison)
	var pe *envelope.PoisonError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, rule, pe.Rule, "detail: %s", pe.Detail)
	assert.Equal(t, pointer, pe.Pointer, "detail: %s", pe.Detail)
	assert.NotEmpty(t, pe.Detail)
	assert.True(t, strings.HasPrefix(err.Error(), "envelope: poison ("+string(rule)+"): "), err.Error())
}

func TestDecodePoison(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	deepObjects := strings.Repeat(`{"a":`, 10001) + "1" + strings.Repeat("}", 10001)
	tests := []struct {
		name    string
		payload string
		rule    envelope.Rule
		pointer string
	}{
		// rule 1
		{"invalid byte", "{\"job\":\"\xff\"}", envelope.RuleUTF8, ""},
		{"truncated sequence in data", "{\"data\":{\"s\":\"\xc3\x28\"}}", envelope.RuleUTF8, ""},
		{"overlong encoding", "{\"job\":\"\xc0\xaf\"}", envelope.RuleUTF8, ""},
		{"utf8 encoded surrogate", "{\"job\":\"\xed\xa0\x80\"}", envelope.RuleUTF8, ""},
		{"invalid byte outside strings", "{\xff}", envelope.RuleUTF8, ""},
		{"two-byte sequence cut by the end", "{\"data\":{\"s\":\"\xc3", envelope.RuleUTF8, ""},
		{"three-byte sequence cut by the end", "{\"data\":{\"s\":\"\xe2\x82", envelope.RuleUTF8, ""},
		{"known string cut inside a sequence", "{\"job\":\"\xc3", envelope.RuleUTF8, ""},
		// After a valid sequence, whose bytes must not stand in for the next one's.
		{"bad second byte of two", "{\"data\":{\"s\":\"é\xc3(\"}}", envelope.RuleUTF8, ""},
		{"bad second byte of three", "{\"data\":{\"s\":\"é\xe2(\xa1\"}}", envelope.RuleUTF8, ""},
		{"bad third byte of three", "{\"data\":{\"s\":\"éa\xe2\x82(\"}}", envelope.RuleUTF8, ""},
		{"overlong three-byte sequence in data", "{\"data\":{\"s\":\"\xe0\x80\xaf\"}}", envelope.RuleUTF8, ""},
		{"four-byte sequence cut short in data", "{\"data\":{\"s\":\"\xf0\x90\x80\"}}", envelope.RuleUTF8, ""},
		// rule 2
		{"empty", "", envelope.RuleSingleObject, ""},
		{"only whitespace", " \n\t\r", envelope.RuleSingleObject, ""},
		{"byte order mark", "\uFEFF{}", envelope.RuleSingleObject, ""},
		{"array", `[{"job":"x"}]`, envelope.RuleSingleObject, ""},
		{"null", `null`, envelope.RuleSingleObject, ""},
		{"string", `"{}"`, envelope.RuleSingleObject, ""},
		{"number", `42`, envelope.RuleSingleObject, ""},
		{"boolean", `true`, envelope.RuleSingleObject, ""},
		{"trailing bytes", `{} x`, envelope.RuleSingleObject, ""},
		{"two objects", `{}{}`, envelope.RuleSingleObject, ""},
		{"trailing newline then garbage", "{}\n\x00", envelope.RuleSingleObject, ""},
		{"unterminated object", `{"job":"x"`, envelope.RuleSingleObject, ""},
		{"lone brace", `{`, envelope.RuleSingleObject, ""},
		{"key at the end", `{"x"`, envelope.RuleSingleObject, ""},
		{"comma at the end", `{"x":1,`, envelope.RuleSingleObject, ""},
		{"trailing comma", `{"job":"x",}`, envelope.RuleSingleObject, ""},
		{"missing colon", `{"job" "x"}`, envelope.RuleSingleObject, ""},
		{"single quotes", `{'job':'x'}`, envelope.RuleSingleObject, ""},
		{"unquoted key", `{job:"x"}`, envelope.RuleSingleObject, ""},
		{"nul as whitespace", "{\x00}", envelope.RuleSingleObject, ""},
		{"vertical tab as whitespace", "{\v}", envelope.RuleSingleObject, ""},
		{"leading zero", `{"x":01}`, envelope.RuleSingleObject, ""},
		{"bare fraction", `{"x":.5}`, envelope.RuleSingleObject, "/x"},
		{"empty fraction", `{"x":1.}`, envelope.RuleSingleObject, "/x"},
		{"empty exponent", `{"x":1e}`, envelope.RuleSingleObject, "/x"},
		{"plus sign", `{"x":+1}`, envelope.RuleSingleObject, "/x"},
		{"NaN", `{"x":NaN}`, envelope.RuleSingleObject, "/x"},
		{"bad literal", `{"x":tru}`, envelope.RuleSingleObject, "/x"},
		{"invalid escape", `{"x":"\x"}`, envelope.RuleSingleObject, "/x"},
		{"short unicode escape", `{"x":"\u12"}`, envelope.RuleSingleObject, "/x"},
		{"bad hex in escape", `{"x":"\u12G4"}`, envelope.RuleSingleObject, "/x"},
		{"raw control character", "{\"x\":\"a\tb\"}", envelope.RuleSingleObject, "/x"},
		{"raw newline in known string", "{\"job\":\"a\nb\"}", envelope.RuleSingleObject, "/job"},
		{"invalid json in data", `{"data":{"a":[1,2}}`, envelope.RuleSingleObject, "/data"},
		{"invalid json in meta unknown", `{"meta":{"x":[}}`, envelope.RuleSingleObject, "/meta/x"},
		{"invalid json in dead_letter unknown", `{"dead_letter":{"x":-}}`, envelope.RuleSingleObject, "/dead_letter/x"},
		{"pointer escaping", `{"a/b~c":[}`, envelope.RuleSingleObject, "/a~1b~0c"},
		{"malformed forbidden value", `{"timestamp":[}`, envelope.RuleSingleObject, "/timestamp"},
		{"malformed wrong-typed value", `{"job":[1,}`, envelope.RuleSingleObject, "/job"},
		{"too deep", `{"x":` + deep + `}`, envelope.RuleSingleObject, "/x"},
		{"too deep in objects", `{"x":` + deepObjects + `}`, envelope.RuleSingleObject, "/x"},
		{"literal cut by the end", `{"x":tru`, envelope.RuleSingleObject, "/x"},
		{"data cut after its brace", `{"data":{`, envelope.RuleSingleObject, "/data"},
		{"data cut after a key", `{"data":{"a"`, envelope.RuleSingleObject, "/data"},
		{"data cut after '['", `{"data":{"a":[`, envelope.RuleSingleObject, "/data"},
		{"data cut after an element", `{"data":{"a":[1`, envelope.RuleSingleObject, "/data"},
		{"unicode escape cut by the end", `{"x":"\u12`, envelope.RuleSingleObject, "/x"},
		{"minus sign at the end", `{"x":-`, envelope.RuleSingleObject, "/x"},
		{"backslash at the end", `{"x":"\`, envelope.RuleSingleObject, "/x"},
		{"bad key escape", `{"\q":1}`, envelope.RuleSingleObject, ""},
		// rule 4
		{"job number", `{"job":1}`, envelope.RuleType, "/job"},
		{"job null", `{"job":null}`, envelope.RuleType, "/job"},
		{"urn boolean", `{"urn":true}`, envelope.RuleType, "/urn"},
		{"trace_id array", `{"trace_id":[]}`, envelope.RuleType, "/trace_id"},
		{"data array", `{"data":[]}`, envelope.RuleType, "/data"},
		{"data null", `{"data":null}`, envelope.RuleType, "/data"},
		{"data string", `{"data":"{}"}`, envelope.RuleType, "/data"},
		{"meta array", `{"meta":[]}`, envelope.RuleType, "/meta"},
		{"meta null", `{"meta":null}`, envelope.RuleType, "/meta"},
		{"meta id number", `{"meta":{"id":1}}`, envelope.RuleType, "/meta/id"},
		{"meta queue null", `{"meta":{"queue":null}}`, envelope.RuleType, "/meta/queue"},
		{"meta lang boolean", `{"meta":{"lang":false}}`, envelope.RuleType, "/meta/lang"},
		{"schema_version string", `{"meta":{"schema_version":"1"}}`, envelope.RuleType, "/meta/schema_version"},
		{"schema_version fraction", `{"meta":{"schema_version":1.0}}`, envelope.RuleType, "/meta/schema_version"},
		{"created_at exponent", `{"meta":{"created_at":1e12}}`, envelope.RuleType, "/meta/created_at"},
		{"created_at overflow", `{"meta":{"created_at":9223372036854775808}}`, envelope.RuleType, "/meta/created_at"},
		{"attempts string", `{"attempts":"3"}`, envelope.RuleType, "/attempts"},
		{"attempts fraction", `{"attempts":3.0}`, envelope.RuleType, "/attempts"},
		{"attempts exponent", `{"attempts":1e2}`, envelope.RuleType, "/attempts"},
		{"attempts null", `{"attempts":null}`, envelope.RuleType, "/attempts"},
		{"attempts overflow", `{"attempts":99999999999999999999}`, envelope.RuleType, "/attempts"},
		{"attempts negative overflow", `{"attempts":-99999999999999999999}`, envelope.RuleType, "/attempts"},
		{"duplicate with a wrong first type", `{"attempts":"3","attempts":3}`, envelope.RuleType, "/attempts"},
		{"dead_letter null", `{"dead_letter":null}`, envelope.RuleType, "/dead_letter"},
		{"dead_letter array", `{"dead_letter":[]}`, envelope.RuleType, "/dead_letter"},
		{"dead_letter reason", `{"dead_letter":{"reason":1}}`, envelope.RuleType, "/dead_letter/reason"},
		{"dead_letter error", `{"dead_letter":{"error":1}}`, envelope.RuleType, "/dead_letter/error"},
		{"dead_letter exception", `{"dead_letter":{"exception":[]}}`, envelope.RuleType, "/dead_letter/exception"},
		{"dead_letter failed_at", `{"dead_letter":{"failed_at":"1"}}`, envelope.RuleType, "/dead_letter/failed_at"},
		{"dead_letter original_queue", `{"dead_letter":{"original_queue":{}}}`, envelope.RuleType, "/dead_letter/original_queue"},
		{"dead_letter attempts", `{"dead_letter":{"attempts":1.5}}`, envelope.RuleType, "/dead_letter/attempts"},
		{"dead_letter lang", `{"dead_letter":{"lang":null}}`, envelope.RuleType, "/dead_letter/lang"},
		{"escaped known key is known", `{"\u006aob":1}`, envelope.RuleType, "/job"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := envelope.Decode([]byte(tt.payload))
			assert.Nil(t, e)
			requirePoison(t, err, tt.rule, tt.pointer)
			e, err = envelope.Classify([]byte(tt.payload))
			assert.Nil(t, e)
			requirePoison(t, err, tt.rule, tt.pointer)
		})
	}
}

func TestClassifyRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		payload string
		rule    envelope.Rule
		pointer string
	}{
		{"no job nor urn", `{"trace_id":"t","data":{},"meta":{"schema_version":1}}`, envelope.RuleURN, "/job"},
		{"upper-case JOB is an unknown key", `{"JOB":"urn:a:b","trace_id":"t","data":{},"meta":{"schema_version":1}}`, envelope.RuleURN, "/job"},
		{"blank job, no urn", `{"job":" \t\n\u000b\f\r","trace_id":"t","data":{},"meta":{"schema_version":1}}`, envelope.RuleURN, "/job"},
		{"blank job and urn", `{"job":"","urn":"  ","trace_id":"t","data":{},"meta":{"schema_version":1}}`, envelope.RuleURN, "/job"},
		{"schema_version 2", `{"job":"u","trace_id":"t","data":{},"meta":{"schema_version":2}}`, envelope.RuleSchemaVersion, "/meta/schema_version"},
		{"schema_version 0", `{"job":"u","trace_id":"t","data":{},"meta":{"schema_version":0}}`, envelope.RuleSchemaVersion, "/meta/schema_version"},
		{"schema_version missing", `{"job":"u","trace_id":"t","data":{},"meta":{}}`, envelope.RuleSchemaVersion, "/meta/schema_version"},
		{"meta missing", `{"job":"u","trace_id":"t","data":{}}`, envelope.RuleSchemaVersion, "/meta/schema_version"},
		{"data missing", `{"job":"u","trace_id":"t","meta":{"schema_version":1}}`, envelope.RuleData, "/data"},
		{"trace_id missing", `{"job":"u","data":{},"meta":{"schema_version":1}}`, envelope.RuleTraceID, "/trace_id"},
		{"trace_id blank", `{"job":"u","trace_id":" \r\n","data":{},"meta":{"schema_version":1}}`, envelope.RuleTraceID, "/trace_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := envelope.Decode([]byte(tt.payload))
			require.NoError(t, err, "rules 5-6 are not Decode's")
			e, err := envelope.Classify([]byte(tt.payload))
			assert.Nil(t, e)
			requirePoison(t, err, tt.rule, tt.pointer)
		})
	}
}

func TestClassifyAccepts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		payload  string
		urn      string
		attempts int
	}{
		{"minimal, attempts missing reads 0", minimal + "}", "urn:babel:orders:created", 0},
		{"negative attempts clamps to 0", string(body(`,"attempts":-5`)), "urn:babel:orders:created", 0},
		{"minus zero", string(body(`,"attempts":-0`)), "urn:babel:orders:created", 0},
		{"duplicate keys: last wins", string(body(`,"attempts":1,"attempts":7`)), "urn:babel:orders:created", 7},
		{"surrounding JSON whitespace", " \r\n\t" + minimal + "} \n", "urn:babel:orders:created", 0},
		{"urn alias", `{"urn":"urn:a:b","trace_id":"t","data":{},"meta":{"schema_version":1}}`, "urn:a:b", 0},
		{"blank job falls back to urn", string(readTestdataNoT("urn-blank-job.json")), "urn:babel:orders:created", 0},
		{"job wins over urn", `{"urn":"urn:x","job":"urn:y","trace_id":"t","data":{},"meta":{"schema_version":1}}`, "urn:y", 0},
		{"job trimmed of ASCII blanks only", "{\"job\":\"\\u00a0urn:a\\t\",\"trace_id\":\"t\",\"data\":{},\"meta\":{\"schema_version\":1}}", "\u00a0urn:a", 0},
		{"NBSP is not blank", `{"job":"\u00a0","trace_id":"\u3000","data":{},"meta":{"schema_version":1}}`, "\u00a0", 0},
		{"max int64 created_at", string(body(`,"meta":{"schema_version":1,"created_at":9223372036854775807}`)), "urn:babel:orders:created", 0},
		{"min int64 created_at", string(body(`,"meta":{"schema_version":1,"created_at":-9223372036854775808}`)), "urn:babel:orders:created", 0},
		{"dead_letter nulls", string(body(`,"dead_letter":{"error":null,"exception":null}`)), "urn:babel:orders:created", 0},
		{"lone surrogate escape", `{"job":"urn:\ud800","trace_id":"t","data":{"s":"\udc00"},"meta":{"schema_version":1}}`, "urn:\uFFFD", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, err := envelope.Classify([]byte(tt.payload))
			require.NoError(t, err)
			assert.Equal(t, tt.urn, e.URN())
			assert.Equal(t, tt.attempts, e.Attempts)
		})
	}
}

func readTestdataNoT(name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		panic(err)
	}
	return b
}

func TestDecodeFields(t *testing.T) {
	t.Parallel()
	e, err := envelope.Classify(readTestdata(t, "big-numbers.json"))
	require.NoError(t, err)
	assert.Equal(t, "urn:babel:ledger:posted", e.Job)
	assert.Equal(t, "0b6a3c1e-2f4d-4e5a-8b7c-9d0e1f2a3b4c", e.TraceID)
	assert.Equal(t, envelope.Meta{
		ID: "5c2d1e0f-3a4b-4c5d-9e6f-7a8b9c0d1e2f", Queue: "ledger", Lang: "java",
		SchemaVersion: 1, CreatedAt: 1749132727000,
	}, e.Meta)
	assert.Equal(t, 4, e.Attempts)
	assert.Nil(t, e.DeadLetter)
	assert.Empty(t, e.Warnings())
	assertCanonical(t, `{"id":9007199254740993,"ratio":1.0,"tiny":1e-7,"huge":1E+400,"neg":-0,`+
		`"nested":{"list":[1.50,-2.25e3,0.1],"s":"\u00e9\/"}}`, e.Data,
		"data keeps its exact text, only whitespace is removed")
}

func TestDecodeStringEscapes(t *testing.T) {
	t.Parallel()
	e, err := envelope.Decode([]byte(`{"job":"a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u00A9\u00FF\u00af\ud83d\ude00\ud800x\udc00\ud83dA","trace_id":"\u2028"}`))
	require.NoError(t, err)
	assert.Equal(t, "a\"b\\c/d\b\f\n\r\tAé©ÿ¯😀\uFFFDx\uFFFD\uFFFDA", e.Job, "hex digits of either case")
	assert.Equal(t, "\u2028", e.TraceID)

	var viaStd struct {
		Job string `json:"job"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"job":"\ud800x\udc00\ud83dA\ud83d\ude00"}`), &viaStd))
	e, err = envelope.Decode([]byte(`{"job":"\ud800x\udc00\ud83dA\ud83d\ude00"}`))
	require.NoError(t, err)
	assert.Equal(t, viaStd.Job, e.Job, "surrogates decode as encoding/json does")
}

func TestDecodeDeadLetter(t *testing.T) {
	t.Parallel()
	e, err := envelope.Classify(body(`,"attempts":3,"dead_letter":{"x-first":1,"reason":"failed","error":"boom","exception":"*errors.errorString",` +
		`"failed_at":1749132730000,"original_queue":"orders","attempts":3,"lang":"php","x-extra":{"k":[true]}}`))
	require.NoError(t, err)
	require.NotNil(t, e.DeadLetter)
	dl := e.DeadLetter
	assert.Equal(t, envelope.ReasonFailed, dl.Reason)
	require.NotNil(t, dl.Error)
	assert.Equal(t, "boom", *dl.Error)
	require.NotNil(t, dl.Exception)
	assert.Equal(t, "*errors.errorString", *dl.Exception)
	assert.Equal(t, int64(1749132730000), dl.FailedAt)
	assert.Equal(t, "orders", dl.OriginalQueue)
	assert.Equal(t, 3, dl.Attempts)
	assert.Equal(t, "php", dl.Lang)

	out, err := e.Encode()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"dead_letter":{"reason":"failed","error":"boom","exception":"*errors.errorString",`+
		`"failed_at":1749132730000,"original_queue":"orders","attempts":3,"lang":"php","x-first":1,"x-extra":{"k":[true]}}`)
}

func TestDecodeUnknownAndForbiddenKeys(t *testing.T) {
	t.Parallel()
	e, err := envelope.Classify(readTestdata(t, "unknown-and-forbidden.json"))
	require.NoError(t, err)
	assert.Equal(t, "cobol", e.Meta.Lang)
	assert.Equal(t, 1, e.Attempts, "meta.attempts is forbidden and never read")
	assert.Equal(t, []envelope.Warning{
		{Pointer: "/timestamp", Message: "forbidden key /timestamp ignored and dropped on re-encode"},
		{Pointer: "/meta/ts", Message: "forbidden key /meta/ts ignored and dropped on re-encode"},
		{Pointer: "/meta/max_retries", Message: "forbidden key /meta/max_retries ignored and dropped on re-encode"},
		{Pointer: "/meta/attempts", Message: "forbidden key /meta/attempts ignored and dropped on re-encode"},
		{Pointer: "/meta/source", Message: "forbidden key /meta/source ignored and dropped on re-encode"},
	}, e.Warnings())

	out, err := e.Encode()
	require.NoError(t, err)
	assertCanonical(t, `{"job":"urn:babel:orders:created","trace_id":"7b3f9c2a-e41d-4f88-9b2a-1c0d5e6f7a8b","data":{"order_id":1042},`+
		`"meta":{"id":"f1e2d3c4-b5a6-4789-90ab-cdef01234567","queue":"orders","lang":"cobol","schema_version":1,`+
		`"created_at":1749132727000,"region":"eu-west-1","priority":1.0},"attempts":1,`+
		`"x-tenant":{"id":42,"tags":["a","b"]},"z-last":null}`, out)

	again, err := envelope.Decode(out)
	require.NoError(t, err)
	assert.Empty(t, again.Warnings(), "forbidden keys were dropped")
}

func TestDecodeWarningsOncePerPointer(t *testing.T) {
	t.Parallel()
	e, err := envelope.Decode(body(`,"timestamp":1,"timestamp":2,"meta":{"schema_version":1,"ts":1,"\u0074s":2}`))
	require.NoError(t, err)
	ptrs := make([]string, 0, 2)
	for _, w := range e.Warnings() {
		ptrs = append(ptrs, w.Pointer)
	}
	assert.Equal(t, []string{"/timestamp", "/meta/ts"}, ptrs)
}

func TestDecodeDuplicateUnknownKeys(t *testing.T) {
	t.Parallel()
	e, err := envelope.Decode([]byte(`{"b":1,"a":1,"b":[2],"\u0061":"x"}`))
	require.NoError(t, err)
	out, err := e.Encode()
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(string(out), `,"attempts":0,"b":[2],"\u0061":"x"}`), string(out))
}

func TestDecodeDuplicateBlocksReplaceWhole(t *testing.T) {
	t.Parallel()
	e, err := envelope.Decode([]byte(`{"meta":{"id":"a","queue":"q","x":1},"meta":{"id":"b"},"data":{"a":1},"data":{"b":2},` +
		`"dead_letter":{"reason":"failed","error":"boom","exception":"E","failed_at":1,"original_queue":"q","attempts":3,"lang":"php","y":1},` +
		`"dead_letter":{"failed_at":2}}`))
	require.NoError(t, err)
	assert.Equal(t, envelope.Meta{ID: "b"}, e.Meta)
	assert.JSONEq(t, `{"b":2}`, string(e.Data))
	assert.Equal(t, &envelope.DeadLetter{FailedAt: 2}, e.DeadLetter)
	out, err := e.Encode()
	require.NoError(t, err)
	assert.NotContains(t, string(out), `"x":1`)
	assert.NotContains(t, string(out), `"y":1`)
}

func TestDecodeOwnsItsMemory(t *testing.T) {
	t.Parallel()
	payload := body(`,"x-u":{"k":"v"}`)
	e, err := envelope.Decode(payload)
	require.NoError(t, err)
	want, err := e.Encode()
	require.NoError(t, err)
	for i := range payload {
		payload[i] = 'X' // the caller reuses its buffer
	}
	got, err := e.Encode()
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got))
}

func TestDecodeBigNumbersSurviveRetry(t *testing.T) {
	t.Parallel()
	e, err := envelope.Classify([]byte(`{"job":"urn:a:b","trace_id":"t","data":{"id":9007199254740993,"ratio":1.0},"meta":{"schema_version":1},"attempts":2}`))
	require.NoError(t, err)
	out, err := e.WithAttempts(e.Attempts + 1).Encode()
	require.NoError(t, err)
	assert.Contains(t, string(out), `"data":{"id":9007199254740993,"ratio":1.0}`)
	assert.Contains(t, string(out), `"attempts":3`)

	again, err := envelope.Classify(out)
	require.NoError(t, err)
	var v map[string]any
	require.NoError(t, again.Bind(&v))
	assert.Equal(t, json.Number("9007199254740993"), v["id"])
	assert.Equal(t, json.Number("1.0"), v["ratio"])
}

func TestPoisonErrorIs(t *testing.T) {
	t.Parallel()
	_, err := envelope.Decode([]byte(`[]`))
	require.ErrorIs(t, err, envelope.ErrPoison)
	require.NotErrorIs(t, err, envelope.ErrInvalidData)
	assert.Equal(t, "envelope: poison (single_object): payload is a JSON array, not an object", err.Error())
}

// TestPoisonDetails pins what a poison error says beyond its rule: where the payload is
// malformed (the member, when there is one, and the byte offset) and where its first
// invalid UTF-8 byte is.
func TestPoisonDetails(t *testing.T) {
	t.Parallel()
	tests := []struct{ payload, want string }{
		{`{"data":{"a":[1,2}}`, "envelope: poison (single_object): malformed JSON in /data: " +
			"invalid character '}', want ',' or ']' after an array element at byte 17"},
		{`{"job" "x"}`, "envelope: poison (single_object): malformed JSON: " +
			"invalid character '\"', want ':' after an object key at byte 7"},
		{`{"x":01}`, "envelope: poison (single_object): malformed JSON: " +
			"invalid character '1', want ',' or '}' after an object member at byte 6"},
		{`{"x":tru}`, "envelope: poison (single_object): malformed JSON in /x: invalid literal, want true at byte 8"},
		{`{"x":"\u0041`, "envelope: poison (single_object): malformed JSON in /x: unterminated string at byte 5"},
		{`{"x":"\q"}`, "envelope: poison (single_object): malformed JSON in /x: invalid escape 'q' in a string at byte 6"},
		{`{"x":- 1}`, "envelope: poison (single_object): malformed JSON in /x: invalid character ' ' in a number at byte 6"},
		{"{\"x\":\x7f}", "envelope: poison (single_object): malformed JSON in /x: invalid character 0x7f looking for a value at byte 5"},
		{"{\"job\":\"a\xffb\"}", "envelope: poison (utf8): payload is not valid UTF-8 (first invalid byte at 9)"},
	}
	for _, tt := range tests {
		_, err := envelope.Decode([]byte(tt.payload))
		require.Error(t, err)
		assert.Equal(t, tt.want, err.Error(), "payload %q", tt.payload)
	}
}

func TestDecodeDepthMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	for _, n := range []int{9999, 10000} { // the frame is one level, so 9999 arrays reach 10000
		payload := []byte(`{"x":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
		_, err := envelope.Decode(payload)
		assert.Equal(t, json.Valid(payload), err == nil, "depth %d: %v", n, err)
	}
	assert.True(t, json.Valid([]byte(strings.Repeat("[", 10000)+strings.Repeat("]", 10000))), "the limit is 10000")
}
