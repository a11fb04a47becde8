package main

import (
	"fmt"
	"io"
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// terminalWriter is a writer that says itself whether it is a terminal. A test's stderr
// implements it to get the progress bar a terminal would.
type terminalWriter interface {
	io.Writer
	IsTerminal() bool
}

// isTerminal reports whether w is a terminal: a terminalWriter that says so, or an *os.File
// open on a terminal.
func isTerminal(w io.Writer) bool {
	switch w := w.(type) {
	case terminalWriter:
		return w.IsTerminal()
	case *os.File:
		return term.IsTerminal(int(w.Fd()))
	default:
		return false
	}
}

// progress is the progress bar of a long command on a terminal; a nil *progress shows
// nothing.
type progress struct {
	w      io.Writer
	bar    *progressbar.ProgressBar
	raised bool // step raised the total past the one given
}

// newProgress returns a bar on w with total steps, with the count, the rate and the time
// left, or an indeterminate spinner with the count and the rate when total is not positive;
// nil when w is not a terminal, so that what goes to a file or a pipe stays as it was.
func newProgress(w io.Writer, description string, total int64) *progress {
	if !isTerminal(w) {
		return nil
	}
	if total <= 0 {
		total = -1
	}
	bar := progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(description),
		progressbar.OptionSetItsString("msg"),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowElapsedTimeOnFinish(),
		// Render at once, before the spinner's own goroutine starts: it then only reads the
		// start time, never races with its first write.
		progressbar.OptionSetRenderBlankState(true),
	)
	return &progress{w: w, bar: bar}
}

// step counts one step done. A total is a floor (a redrive's is the backlog, which counts a
// batch of messages once), and a bar that reaches its total ends and draws nothing more: so
// the step that would reach it raises it by one first, and done settles it.
func (p *progress) step() {
	if p == nil {
		return
	}
	if st := p.bar.State(); st.Max > 0 && st.CurrentNum+1 >= st.Max {
		p.bar.ChangeMax64(st.CurrentNum + 2)
		p.raised = true
	}
	// The bar is a display: a failed write to the terminal does not fail the command.
	_ = p.bar.Add(1)
}

// done fills the bar, stops the spinner and ends the bar's line, so that what follows
// starts on a line of its own.
func (p *progress) done() {
	if p == nil {
		return
	}
	if st := p.bar.State(); p.raised {
		p.bar.ChangeMax64(st.CurrentNum) // the count is the total
	}
	_ = p.bar.Finish() // a display, as in step
	fmt.Fprintln(p.w)
}
