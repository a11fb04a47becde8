package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// usageError is an error of the caller (a bad flag value, a missing file it named): the
// command exits with status 2 instead of 1.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// failLine prints err as one line, "command: message", with the line breaks of joined
// errors folded into "; " and control characters escaped, and returns the exit status:
// 2 for a usageError, 130 when the error is an interruption (context.Canceled), 1 otherwise.
func failLine(stderr io.Writer, command string, err error) int {
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(stderr, "%s: interrupted\n", command)
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "%s: %s\n", command, oneLine(err.Error()))
	if errors.As(err, new(usageError)) {
		return exitUsage
	}
	return exitFail
}

// usageLine prints a usage error as one line and returns exit status 2.
func usageLine(stderr io.Writer, command, format string, args ...any) int {
	fmt.Fprintf(stderr, "%s: %s\n", command, oneLine(fmt.Sprintf(format, args...)))
	return exitUsage
}

// oneLine folds line breaks into "; " and escapes what is left of control characters.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return escape(strings.ReplaceAll(s, "\n", "; "))
}

// parseFlags parses args with fs and maps the outcome onto an exit status: -1 means go on.
// -h prints the command's usage on stderr (exit 0); any other parse error is one line
// with a pointer to --help (exit 2), never the usage text.
func parseFlags(fs *flag.FlagSet, args []string, stderr io.Writer) int {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			if fs.Usage != nil {
				fs.Usage()
			} else {
				fmt.Fprintf(stderr, "Usage of %s:\n", fs.Name())
				fs.PrintDefaults()
			}
			return exitOK
		}
		return usageLine(stderr, fs.Name(), "%s; see `%s --help`", err, fs.Name())
	}
	if fs.NArg() > 0 {
		return usageLine(stderr, fs.Name(), "unexpected argument %q; see `%s --help`", fs.Arg(0), fs.Name())
	}
	return -1
}

// intFlag is an integer flag with a lower bound, checked when it is parsed.
type intFlag struct {
	p   *int
	min int
}

func (f *intFlag) String() string {
	if f == nil || f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}

func (f *intFlag) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	if n < f.min {
		return fmt.Errorf("must be at least %d", f.min)
	}
	*f.p = n
	return nil
}

// newIntFlag defines an integer flag that refuses values below lowest.
func newIntFlag(fs *flag.FlagSet, name string, value, lowest int, usage string) *int {
	p := new(int)
	*p = value
	fs.Var(&intFlag{p: p, min: lowest}, name, usage)
	return p
}

// durationFlag is a duration flag that refuses negative values, and zero when positive.
type durationFlag struct {
	p        *time.Duration
	positive bool
}

func (f *durationFlag) String() string {
	if f == nil || f.p == nil {
		return "0s"
	}
	return f.p.String()
}

func (f *durationFlag) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration (for example 500ms, 2s, 1m)")
	}
	switch {
	case f.positive && d <= 0:
		return errors.New("must be positive")
	case d < 0:
		return errors.New("must not be negative")
	}
	*f.p = d
	return nil
}

// newDurationFlag defines a duration flag that refuses negative values (and zero when
// positive is set).
func newDurationFlag(fs *flag.FlagSet, name string, value time.Duration, positive bool, usage string) *time.Duration {
	p := new(time.Duration)
	*p = value
	fs.Var(&durationFlag{p: p, positive: positive}, name, usage)
	return p
}

// enumFlag is a string flag restricted to a fixed set of values.
type enumFlag struct {
	p       *string
	allowed []string
}

func (f *enumFlag) String() string {
	if f == nil || f.p == nil {
		return ""
	}
	return *f.p
}

func (f *enumFlag) Set(s string) error {
	for _, a := range f.allowed {
		if s == a {
			*f.p = s
			return nil
		}
	}
	return fmt.Errorf("must be %s", orList(f.allowed))
}

// newEnumFlag defines a string flag that accepts only the allowed values (and its default).
func newEnumFlag(fs *flag.FlagSet, name, value string, allowed []string, usage string) *string {
	p := new(string)
	*p = value
	fs.Var(&enumFlag{p: p, allowed: allowed}, name, usage+" ("+strings.Join(allowed, ", ")+")")
	return p
}

// orList renders "a", "a or b", "a, b or c".
func orList(items []string) string {
	switch len(items) {
	case 0:
		return "empty"
	case 1:
		return items[0]
	default:
		return strings.Join(items[:len(items)-1], ", ") + " or " + items[len(items)-1]
	}
}
