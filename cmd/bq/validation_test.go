package main

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// assertOneLineUsage checks a usage error: exit 2, one line on stderr that starts with
// prefix, no usage text, no stack.
func assertOneLineUsage(t *testing.T, prefix string, args ...string) string {
	t.Helper()
	code, stdout, stderr := runBQ(t, args...)
	assert.Equal(t, exitUsage, code, "%v: %s", args, stderr)
	assert.Empty(t, stdout, "%v", args)
	assert.Equal(t, 1, strings.Count(stderr, "\n"), "%v: one line: %q", args, stderr)
	assert.True(t, strings.HasPrefix(stderr, prefix+": "), "%v: %q", args, stderr)
	assert.NotContains(t, stderr, "Usage")
	assert.NotContains(t, stderr, "goroutine")
	return stderr
}

func TestBadValuesAreOneLineUsageErrors(t *testing.T) {
	t.Setenv(envURL, "pulsar://127.0.0.1:1") // never reached: every case fails before connecting
	pub := []string{"publish", "--topic", "orders", "--urn", "urn:x"}
	for _, tc := range []struct {
		prefix string
		args   []string
		want   string
	}{
		{"bq publish", append(pub, "--count", "0"), `invalid value "0" for flag -count: must be at least 1`},
		{"bq publish", append(pub, "--count", "-3"), `invalid value "-3" for flag -count: must be at least 1`},
		{"bq publish", append(pub, "--count", "many"), `invalid value "many" for flag -count: not an integer`},
		{"bq publish", append(pub, "--delay", "-5s"), `invalid value "-5s" for flag -delay: must not be negative`},
		{"bq publish", append(pub, "--delay", "soon"), `invalid value "soon" for flag -delay: not a duration`},
		{"bq publish", append(pub, "--timeout", "0"), `invalid value "0" for flag -timeout: must be positive`},
		{"bq publish", append(pub, "--connect-timeout", "-1s"), `invalid value "-1s" for flag -connect-timeout: must be positive`},
		{"bq publish", append(pub, "--bogus"), "flag provided but not defined: -bogus; see `bq publish --help`"},
		{"bq publish", append(pub, "--topic"), "flag needs an argument: -topic; see `bq publish --help`"},
		{"bq publish", append(pub, "extra"), "unexpected argument \"extra\"; see `bq publish --help`"},
		{"bq publish", append(pub, "--data", `{"a":}`), "data (--data) is not valid JSON: invalid character '}' looking for beginning of value at line 1, column 6 (offset 5)"},
		{"bq publish", append(pub, "--data", "{\n  \"a\": 1,\n}"), "data (--data) is not valid JSON: invalid character '}' looking for beginning of object key string at line 3, column 1 (offset 12)"},
		{"bq publish", append(pub, "--data", `{"a": 1`), "data (--data) is not valid JSON: unexpected end of JSON input at line 1, column 8 (offset 7)"},
		{"bq publish", append(pub, "--data", `{} {}`), "data (--data) is not valid JSON: invalid character '{' after top-level value at line 1, column 4 (offset 3)"},
		{"bq publish", append(pub, "--data", "\"text\""), "data (--data) must be a JSON object, got a string at line 1, column 1 (offset 0)"},
		{"bq publish", append(pub, "--data", "{\"a\":\"\xff\"}"), "data (--data) is not valid UTF-8 at line 1, column 7 (offset 6)"},
		{"bq publish", []string{"publish"}, "--topic and --urn are required"},
		{"bq tail", []string{"tail", "--topic", "t", "-n", "-5"}, `invalid value "-5" for flag -n: must be at least 0`},
		{"bq tail", []string{"tail", "--topic", "t", "--wait", "-1s"}, `invalid value "-1s" for flag -wait: must not be negative`},
		{"bq tail", []string{"tail", "--topic", "t", "--from", "start"}, `invalid value "start" for flag -from: must be earliest or latest`},
		{"bq tail", []string{"tail", "--topic", "t", "--bogus"}, "flag provided but not defined: -bogus; see `bq tail --help`"},
		{"bq tail", []string{"tail"}, "--topic is required"},
		{"bq dlq list", []string{"dlq", "list", "--topic", "t", "-n", "0"}, `invalid value "0" for flag -n: must be at least 1`},
		{"bq dlq redrive", []string{"dlq", "redrive", "--topic", "t", "--wait", "-2s"}, `invalid value "-2s" for flag -wait: must not be negative`},
		{"bq dlq peek", []string{"dlq", "peek", "--topic", "t", "-n", "x"}, `invalid value "x" for flag -n: not an integer`},
		{"bq dlq redrive", []string{"dlq", "redrive", "--topic", "t", "--reason", "bogus"}, `invalid value "bogus" for flag -reason: must be failed or unknown_urn`},
		{"bq dlq redrive", []string{"dlq", "redrive", "--topic", "t", "--reason", "poison"}, `invalid value "poison" for flag -reason: must be failed or unknown_urn`},
		{"bq dlq redrive", []string{"dlq", "redrive", "--topic", "t", "-n", "-1"}, `invalid value "-1" for flag -n: must be at least 0`},
		{"bq dlq redrive", []string{"dlq", "redrive", "--bogus"}, "flag provided but not defined: -bogus; see `bq dlq redrive --help`"},
		{"bq dlq", []string{"dlq", "purge-everything"}, `unknown subcommand "purge-everything"`},
		{"bq conformance", []string{"conformance", "--bogus"}, "flag provided but not defined: -bogus; see `bq conformance --help`"},
		{"bq broker", []string{"broker", "--bogus"}, "flag provided but not defined: -bogus; see `bq broker --help`"},
		{"bq version", []string{"version", "--bogus"}, `unexpected argument "--bogus"`},
		{"bq", []string{"--bogus"}, "unknown flag --bogus; see `bq --help`"},
		{"bq", []string{"nosuchcmd"}, "unknown command \"nosuchcmd\"; see `bq --help`"},
	} {
		stderr := assertOneLineUsage(t, tc.prefix, tc.args...)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}

func TestConnectionSettingsErrors(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	require.NoError(t, os.WriteFile(empty, []byte(" \n"), 0o600))
	tail := []string{"tail", "--topic", "t", "--url", "pulsar://127.0.0.1:1"}

	stderr := assertOneLineUsage(t, "bq tail", append(tail, "--token", "a", "--token-file", empty)...)
	assert.Contains(t, stderr, "--token and --token-file exclude each other")
	stderr = assertOneLineUsage(t, "bq tail", append(tail, "--token-file", filepath.Join(dir, "missing"))...)
	assert.Contains(t, stderr, "token file "+filepath.Join(dir, "missing")+": no such file or directory")
	stderr = assertOneLineUsage(t, "bq tail", append(tail, "--token-file", empty)...)
	assert.Contains(t, stderr, "token file "+empty+" is empty")

	t.Setenv(envAllowInsecure, "maybe")
	stderr = assertOneLineUsage(t, "bq tail", tail...)
	assert.Contains(t, stderr, `PULSAR_TLS_ALLOW_INSECURE_CONNECTION="maybe" is not true or false`)
}

func TestHelpIsUsageAndExitZero(t *testing.T) {
	for _, args := range [][]string{
		{"publish", "-h"}, {"tail", "--help"}, {"dlq", "list", "-h"}, {"dlq", "redrive", "-h"}, {"conformance", "-h"},
	} {
		code, _, stderr := runBQ(t, args...)
		assert.Equal(t, exitOK, code, "%v", args)
		assert.Contains(t, stderr, "Usage", "%v", args)
	}
	code, stdout, _ := runBQ(t, "help")
	assert.Equal(t, exitOK, code)
	assert.Contains(t, stdout, "version")
}

func TestVersion(t *testing.T) {
	code, stdout, stderr := runBQ(t, "version")
	require.Equal(t, exitOK, code, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3, stdout)
	assert.True(t, strings.HasPrefix(lines[0], "bq github.com/babelqueue/babelqueue-go-pulsar"), lines[0])
	assert.Regexp(t, `^pulsar-client-go (v\d+\.\d+\.\d+\S*|\(devel\))$`, lines[1])
	assert.True(t, strings.HasPrefix(lines[2], "go1."), lines[2])

	assert.Equal(t, "bq github.com/babelqueue/babelqueue-go-pulsar (devel)\npulsar-client-go (devel)\n"+goVersion()+"\n",
		versionText(nil, false))
}

func goVersion() string { return runtime.Version() }

func TestVersionTextFromBuildInfo(t *testing.T) {
	info := &debug.BuildInfo{
		Main: debug.Module{Path: "github.com/babelqueue/babelqueue-go-pulsar", Version: "v1.2.3"},
		Deps: []*debug.Module{
			{Path: "go.uber.org/zap", Version: "v1.28.0"},
			{Path: "github.com/apache/pulsar-client-go", Version: "v0.19.0"},
		},
	}
	assert.Equal(t, "bq github.com/babelqueue/babelqueue-go-pulsar v1.2.3\npulsar-client-go v0.19.0\n"+goVersion()+"\n",
		versionText(info, true))
	info.Deps[1].Replace = &debug.Module{Path: "../fork", Version: ""}
	assert.Contains(t, versionText(info, true), "pulsar-client-go (devel)\n")
}
