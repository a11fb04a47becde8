package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/babelqueue/babelqueue-go-pulsar/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.VerifyTestMain(m) }

// TestPublishThenConsumeDelivers runs the README's Publish snippet and then its Consume
// snippet: the message published before the consumer subscribed must be handled (the new
// subscription starts at Earliest).
func TestPublishThenConsumeDelivers(t *testing.T) {
	t.Setenv("PULSAR_URL", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	start := time.Now()
	require.NoError(t, run(ctx, &out))
	t.Logf("published, subscribed and handled in %s", time.Since(start))
	assert.Contains(t, out.String(), "billed order 1042\n")
	assert.True(t, strings.HasSuffix(out.String(), "done\n"), out.String())
}

// TestREADMEShowsThisCode fails when a Go snippet of the README's Publish or Consume section
// is not, line for line, the code between the "README:" markers of main.go (serviceURL and
// topic stand where the README has literals, which the markers' comments name).
func TestREADMEShowsThisCode(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	for _, section := range []string{"publish", "consume"} {
		code := region(t, string(src), section)
		snippet := firstGoBlock(t, string(readme), "## "+strings.ToUpper(section[:1])+section[1:])
		assert.Equal(t, normalise(code), normalise(snippet), "README section %q differs from examples/readme/main.go", section)
	}
}

func region(t *testing.T, src, name string) string {
	t.Helper()
	start := strings.Index(src, "// README: "+name+"\n")
	require.GreaterOrEqual(t, start, 0, "marker %q", name)
	rest := src[start+len("// README: "+name+"\n"):]
	end := strings.Index(rest, "// README: end")
	require.GreaterOrEqual(t, end, 0)
	return rest[:end]
}

func firstGoBlock(t *testing.T, md, heading string) string {
	t.Helper()
	i := strings.Index(md, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "README heading %q", heading)
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindStringSubmatch(md[i:])
	require.NotNil(t, m, "no go block after %q", heading)
	return m[1]
}

// normalise removes the one level of indentation of a function body and maps the program's
// parameters to the README's literals.
func normalise(s string) string {
	s = strings.ReplaceAll(s, "serviceURL,                       // \"pulsar://localhost:6650\"", "\"pulsar://localhost:6650\",")
	s = strings.ReplaceAll(s, "NewPublisher(client, topic) // \"persistent://public/default/orders\"", "NewPublisher(client, \"persistent://public/default/orders\")")
	s = strings.ReplaceAll(s, "WithTopic(topic)", "WithTopic(\"persistent://public/default/orders\")")
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimPrefix(l, "\t")
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
