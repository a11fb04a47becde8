package pulsar

import (
	"fmt"

	plog "github.com/apache/pulsar-client-go/pulsar/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewClientLogger adapts a *zap.Logger to the logger interface of pulsar-client-go. Pass it
// as apulsar.ClientOptions.Logger: left unset, the client logs through logrus's global
// logger to stderr. A nil logger means zap.NewNop().
//
//	client, err := apulsar.NewClient(apulsar.ClientOptions{
//		URL:    url,
//		Logger: bqpulsar.NewClientLogger(logger),
//	})
func NewClientLogger(logger *zap.Logger) plog.Logger {
	if logger == nil {
		logger = zap.NewNop()
	}
	return clientLogger{z: logger.WithOptions(zap.AddCallerSkip(1))}
}

type clientLogger struct{ z *zap.Logger }

var _ plog.Logger = clientLogger{}

func fieldsOf(f plog.Fields) []zap.Field {
	out := make([]zap.Field, 0, len(f))
	for k, v := range f {
		out = append(out, zap.Any(k, v))
	}
	return out
}

func (l clientLogger) SubLogger(fields plog.Fields) plog.Logger {
	return clientLogger{z: l.z.With(fieldsOf(fields)...)}
}

func (l clientLogger) WithFields(fields plog.Fields) plog.Entry {
	return clientLogger{z: l.z.With(fieldsOf(fields)...)}
}

func (l clientLogger) WithField(name string, value any) plog.Entry {
	return clientLogger{z: l.z.With(zap.Any(name, value))}
}

func (l clientLogger) WithError(err error) plog.Entry {
	return clientLogger{z: l.z.With(zap.Error(err))}
}

// log formats the message only when the level is enabled: the client logs a lot at debug.
func (l clientLogger) log(lvl zapcore.Level, format string, args []any) {
	if !l.z.Core().Enabled(lvl) {
		return
	}
	msg := ""
	if format == "" {
		msg = fmt.Sprint(args...)
	} else {
		msg = fmt.Sprintf(format, args...)
	}
	l.z.Log(lvl, msg)
}

func (l clientLogger) Debug(args ...any) { l.log(zapcore.DebugLevel, "", args) }
func (l clientLogger) Info(args ...any)  { l.log(zapcore.InfoLevel, "", args) }
func (l clientLogger) Warn(args ...any)  { l.log(zapcore.WarnLevel, "", args) }
func (l clientLogger) Error(args ...any) { l.log(zapcore.ErrorLevel, "", args) }

func (l clientLogger) Debugf(format string, args ...any) { l.log(zapcore.DebugLevel, format, args) }
func (l clientLogger) Infof(format string, args ...any)  { l.log(zapcore.InfoLevel, format, args) }
func (l clientLogger) Warnf(format string, args ...any)  { l.log(zapcore.WarnLevel, format, args) }
func (l clientLogger) Errorf(format string, args ...any) { l.log(zapcore.ErrorLevel, format, args) }
