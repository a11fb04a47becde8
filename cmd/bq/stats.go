package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/dlq"
)

// statsBarWidth is the width of the longest bar of `bq dlq stats`, in columns.
const statsBarWidth = 40

// statsJSON is the document `bq dlq stats --json` prints. Its field names are stable.
type statsJSON struct {
	Topic        string          `json:"topic"`
	Subscription string          `json:"subscription"`
	Total        int             `json:"total"`
	Rows         []statsRowJSON  `json:"rows"`
	Oldest       *statsStampJSON `json:"oldest"` // null when total is 0
	Newest       *statsStampJSON `json:"newest"`
}

type statsRowJSON struct {
	URN    string `json:"urn"`    // "" when the copy names none
	Reason string `json:"reason"` // "" for a raw copy (no dead_letter block)
	Count  int    `json:"count"`
}

type statsStampJSON struct {
	Time       string `json:"time"`        // RFC 3339, UTC, milliseconds
	Source     string `json:"source"`      // "failed_at" or "publish_time"
	AgeSeconds int64  `json:"age_seconds"` // whole seconds before the command ran
}

func runDLQStats(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "bq dlq stats"
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var conn connFlags
	conn.register(fs)
	var adm adminFlags
	adm.register(fs)
	defer adm.close()
	topic := fs.String("topic", "", "the dead-letter `topic`, e.g. orders.dlq (required)")
	subscription := subscriptionFlag(fs)
	asJSON := fs.Bool("json", false, "print the counts and ages as one JSON document")
	if code := parseFlags(fs, args, stderr); code >= 0 {
		return code
	}
	if err := checkTopicAndSub(*topic, *subscription); err != nil {
		return failLine(stderr, name, err)
	}
	admin, err := adm.admin(&conn)
	if err != nil {
		return failLine(stderr, name, err)
	}
	sum, err := dlq.Summarize(ctx, admin, dlq.SummaryOptions{Topic: *topic, Subscription: *subscription})
	if err != nil {
		return failLine(stderr, name, err)
	}
	now := time.Now()
	if *asJSON {
		doc := statsJSON{Topic: *topic, Subscription: *subscription, Total: sum.Total, Rows: []statsRowJSON{}}
		for _, r := range sum.Rows {
			doc.Rows = append(doc.Rows, statsRowJSON{URN: r.URN, Reason: string(r.Reason), Count: r.Count})
		}
		if sum.Total > 0 {
			doc.Oldest, doc.Newest = stampJSON(sum.Oldest, now), stampJSON(sum.Newest, now)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(doc); err != nil {
			return failLine(stderr, name, err)
		}
		return exitOK
	}
	fmt.Fprint(stdout, statsText(*topic, *subscription, sum, now))
	return exitOK
}

func stampJSON(s dlq.Stamp, now time.Time) *statsStampJSON {
	return &statsStampJSON{
		Time: s.At.UTC().Format("2006-01-02T15:04:05.000Z07:00"), Source: s.Source,
		AgeSeconds: int64(now.Sub(s.At) / time.Second),
	}
}

// statsText renders a summary as a table with one bar per row, the longest bar
// statsBarWidth columns wide, and the ages of the oldest and the newest dead letter.
func statsText(topic, sub string, sum dlq.Summary, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d dead letter(s) pending on %s (subscription %s)\n", sum.Total, escape(topic), escape(sub))
	if sum.Total == 0 {
		return b.String()
	}
	urns, reasons, counts := make([]string, len(sum.Rows)), make([]string, len(sum.Rows)), make([]string, len(sum.Rows))
	wu, wr, wc := len("URN"), len("REASON"), len("COUNT")
	largest := 0
	for i, r := range sum.Rows {
		urns[i], reasons[i], counts[i] = orDash(escape(r.URN)), orDash(escape(string(r.Reason))), fmt.Sprint(r.Count)
		wu, wr, wc = max(wu, len(urns[i])), max(wr, len(reasons[i])), max(wc, len(counts[i]))
		largest = max(largest, r.Count)
	}
	fmt.Fprintf(&b, "\n%-*s  %-*s  %*s\n", wu, "URN", wr, "REASON", wc, "COUNT")
	for i, r := range sum.Rows {
		fmt.Fprintf(&b, "%-*s  %-*s  %*s  %s\n", wu, urns[i], wr, reasons[i], wc, counts[i], bar(r.Count, largest, statsBarWidth))
	}
	fmt.Fprintln(&b)
	for _, s := range []struct {
		label string
		st    dlq.Stamp
	}{{"oldest", sum.Oldest}, {"newest", sum.Newest}} {
		fmt.Fprintf(&b, "%s  %s ago  (%s, %s)\n", s.label, age(now.Sub(s.st.At)),
			s.st.At.UTC().Format(time.RFC3339), s.st.Source)
	}
	return b.String()
}

// bar is n of largest as a bar of '#', width columns for largest, at least one for n > 0.
func bar(n, largest, width int) string {
	if n <= 0 || largest <= 0 {
		return ""
	}
	return strings.Repeat("#", max(1, (n*width+largest/2)/largest))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// age renders a duration in its two largest units: "3d 4h", "5h 12m", "7m 3s", "42s".
func age(d time.Duration) string {
	if d < 0 {
		d = 0 // a clock ahead of this machine's
	}
	s := int64(d / time.Second)
	days, hours, mins, secs := s/86400, s%86400/3600, s%3600/60, s%60
	switch {
	case days > 0:
		return fmt.Sprintf("%dd %dh", days, hours)
	case hours > 0:
		return fmt.Sprintf("%dh %dm", hours, mins)
	case mins > 0:
		return fmt.Sprintf("%dm %ds", mins, secs)
	default:
		return fmt.Sprintf("%ds", secs)
	}
}
