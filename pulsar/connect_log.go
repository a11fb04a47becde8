package pulsar

import (
	"fmt"

	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// The adapters of pulsar-client-go's logger through which Connect watches the client's
// connection attempts (connect.go): every line goes on to the next logger, and the lines
// that name a connection failure are shown to the watch first.

// pass runs log, the passing on of a line, unless the watch silenced the client's logging.
func (w *connectWatch) pass(log func()) {
	if w.enter() {
		defer w.leave()
		log()
	}
}

// watchLogger passes every line to next and shows the connection failures to a watch.
type watchLogger struct {
	next plog.Logger
	w    *connectWatch
}

var _ plog.Logger = watchLogger{}

func (l watchLogger) SubLogger(fields plog.Fields) plog.Logger {
	return watchLogger{next: l.next.SubLogger(fields), w: l.w}
}

func (l watchLogger) WithFields(fields plog.Fields) plog.Entry {
	return watchEntry{next: l.next.WithFields(fields), w: l.w}
}

func (l watchLogger) WithField(name string, value any) plog.Entry {
	return watchEntry{next: l.next.WithField(name, value), w: l.w}
}

func (l watchLogger) WithError(err error) plog.Entry {
	return watchEntry{next: l.next.WithError(err), w: l.w, err: err}
}

func (l watchLogger) Debug(args ...any) {
	l.w.pass(func() { l.next.Debug(args...) })
}

func (l watchLogger) Info(args ...any) {
	l.w.pass(func() { l.next.Info(args...) })
}

func (l watchLogger) Warn(args ...any) {
	l.w.pass(func() { l.next.Warn(args...) })
}

func (l watchLogger) Error(args ...any) {
	l.w.pass(func() { l.next.Error(args...) })
}

func (l watchLogger) Debugf(format string, args ...any) {
	l.w.pass(func() { l.next.Debugf(format, args...) })
}

func (l watchLogger) Infof(format string, args ...any) {
	l.w.pass(func() { l.next.Infof(format, args...) })
}

func (l watchLogger) Warnf(format string, args ...any) {
	l.w.noteFormat(format, args)
	l.w.pass(func() { l.next.Warnf(format, args...) })
}

func (l watchLogger) Errorf(format string, args ...any) {
	l.w.noteFormat(format, args)
	l.w.pass(func() { l.next.Errorf(format, args...) })
}

// watchEntry is a watchLogger's entry; err is the error it was created with, if any.
type watchEntry struct {
	next plog.Entry
	w    *connectWatch
	err  error
}

var _ plog.Entry = watchEntry{}

func (e watchEntry) WithFields(fields plog.Fields) plog.Entry {
	return watchEntry{next: e.next.WithFields(fields), w: e.w, err: e.err}
}

func (e watchEntry) WithField(name string, value any) plog.Entry {
	return watchEntry{next: e.next.WithField(name, value), w: e.w, err: e.err}
}

func (e watchEntry) Debug(args ...any) {
	e.w.pass(func() { e.next.Debug(args...) })
}

func (e watchEntry) Info(args ...any) {
	e.w.pass(func() { e.next.Info(args...) })
}

func (e watchEntry) Warn(args ...any) {
	e.w.noteError(fmt.Sprint(args...), e.err)
	e.w.pass(func() { e.next.Warn(args...) })
}

func (e watchEntry) Error(args ...any) {
	e.w.noteError(fmt.Sprint(args...), e.err)
	e.w.pass(func() { e.next.Error(args...) })
}

func (e watchEntry) Debugf(format string, args ...any) {
	e.w.pass(func() { e.next.Debugf(format, args...) })
}

func (e watchEntry) Infof(format string, args ...any) {
	e.w.pass(func() { e.next.Infof(format, args...) })
}

func (e watchEntry) Warnf(format string, args ...any) {
	e.w.noteFormat(format, args)
	e.w.pass(func() { e.next.Warnf(format, args...) })
}

func (e watchEntry) Errorf(format string, args ...any) {
	e.w.noteFormat(format, args)
	e.w.pass(func() { e.next.Errorf(format, args...) })
}
