package pulsar

import (
	"fmt"

	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// The adapters of pulsar-client-go's logger through which Connect watches the client's
// connection attempts (connect.go): every line goes on to the next logger, and the lines
// that name a connection failure are shown to the watch first.

// lineLogger is what plog.Logger and plog.Entry have in common: the logging calls.
type lineLogger interface {
	Debug(args ...any)
	Info(args ...any)
	Warn(args ...any)
	Error(args ...any)
	Debugf(format string, args ...any)
	Infof(format string, args ...any)
	Warnf(format string, args ...any)
	Errorf(format string, args ...any)
}

// watchLines passes every line to next and shows the connection failures to a watch; err
// is the error the entry was created with (nil for a logger).
type watchLines struct {
	next lineLogger
	w    *connectWatch
	err  error
}

// pass runs log, the passing on of a line, unless the watch silenced the client's logging.
func (l watchLines) pass(log func()) {
	if l.w.enter() {
		defer l.w.leave()
		log()
	}
}

// noteArgs shows a line logged with an error to the watch.
func (l watchLines) noteArgs(args []any) {
	if l.err != nil {
		l.w.noteError(fmt.Sprint(args...), l.err)
	}
}

func (l watchLines) Debug(args ...any) { l.pass(func() { l.next.Debug(args...) }) }
func (l watchLines) Info(args ...any)  { l.pass(func() { l.next.Info(args...) }) }

func (l watchLines) Warn(args ...any) {
	l.noteArgs(args)
	l.pass(func() { l.next.Warn(args...) })
}

func (l watchLines) Error(args ...any) {
	l.noteArgs(args)
	l.pass(func() { l.next.Error(args...) })
}

func (l watchLines) Debugf(format string, args ...any) {
	l.pass(func() { l.next.Debugf(format, args...) })
}

func (l watchLines) Infof(format string, args ...any) {
	l.pass(func() { l.next.Infof(format, args...) })
}

func (l watchLines) Warnf(format string, args ...any) {
	l.w.noteFormat(format, args)
	l.pass(func() { l.next.Warnf(format, args...) })
}

func (l watchLines) Errorf(format string, args ...any) {
	l.w.noteFormat(format, args)
	l.pass(func() { l.next.Errorf(format, args...) })
}

// watchLogger is the client's logger seen through a watch.
type watchLogger struct {
	watchLines
	logger plog.Logger
}

var _ plog.Logger = watchLogger{}

func newWatchLogger(next plog.Logger, w *connectWatch) watchLogger {
	return watchLogger{watchLines: watchLines{next: next, w: w}, logger: next}
}

func (l watchLogger) SubLogger(fields plog.Fields) plog.Logger {
	return newWatchLogger(l.logger.SubLogger(fields), l.w)
}

func (l watchLogger) WithFields(fields plog.Fields) plog.Entry {
	return newWatchEntry(l.logger.WithFields(fields), l.w, nil)
}

func (l watchLogger) WithField(name string, value any) plog.Entry {
	return newWatchEntry(l.logger.WithField(name, value), l.w, nil)
}

func (l watchLogger) WithError(err error) plog.Entry {
	return newWatchEntry(l.logger.WithError(err), l.w, err)
}

// watchEntry is a watchLogger's entry.
type watchEntry struct {
	watchLines
	entry plog.Entry
}

var _ plog.Entry = watchEntry{}

func newWatchEntry(next plog.Entry, w *connectWatch, err error) watchEntry {
	return watchEntry{watchLines: watchLines{next: next, w: w, err: err}, entry: next}
}

func (e watchEntry) WithFields(fields plog.Fields) plog.Entry {
	return newWatchEntry(e.entry.WithFields(fields), e.w, e.err)
}

func (e watchEntry) WithField(name string, value any) plog.Entry {
	return newWatchEntry(e.entry.WithField(name, value), e.w, e.err)
}
