package messaging

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Ordinals of the built-in configuration sources: a higher
// ordinal wins per key.
const (
	OrdinalMap        = 400
	OrdinalEnv        = 300
	OrdinalProperties = 100
	OrdinalDefaults   = 0
)

// Global configuration keys.
const (
	KeyEmitterBufferSize = "mp.messaging.emitter.default-buffer-size"
	KeyReadyExclude      = "mp.health.ready.exclude-channel"
	KeyLiveExclude       = "mp.health.live.exclude-channel"
	KeyStrict            = "babelqueue.messaging.strict"
	KeyShutdownTimeout   = "babelqueue.messaging.shutdown-timeout"
)

var globalKeys = []string{KeyEmitterBufferSize, KeyReadyExclude, KeyLiveExclude, KeyStrict, KeyShutdownTimeout}

const (
	prefixIncoming  = "mp.messaging.incoming."
	prefixOutgoing  = "mp.messaging.outgoing."
	prefixConnector = "mp.messaging.connector."
)

// ConfigSource is a named set of properties with an ordinal.
type ConfigSource interface {
	Name() string
	Ordinal() int
	// Properties returns the source's key/value pairs.
	Properties() (map[string]string, error)
}

// envSource marks sources whose keys are environment variable names,
// resolved at Start.
type envSource interface{ envVariables() bool }

// warner is an optional ConfigSource capability: problems found while
// reading that are not errors (e.g. a repeated key).
type warner interface{ Warnings() []string }

type mapSource struct {
	name    string
	ordinal int
	props   map[string]string
	env     bool
	warns   []string
	err     error
}

func (s *mapSource) Name() string { return s.name }
func (s *mapSource) Ordinal() int { return s.ordinal }
func (s *mapSource) Properties() (map[string]string, error) {
	return maps.Clone(s.props), s.err
}
func (s *mapSource) Warnings() []string { return s.warns }
func (s *mapSource) envVariables() bool { return s.env }

// FromMap returns a source of explicit properties (ordinal 400).
func FromMap(m map[string]string) ConfigSource {
	return &mapSource{name: "map", ordinal: OrdinalMap, props: maps.Clone(m)}
}

// FromEnv returns the process environment as a source (ordinal 300): the
// variables starting with MP_MESSAGING_, MP_HEALTH_ or BABELQUEUE_MESSAGING_
// (or literally named like a key), resolved at Start against the known
// channel, connector and attribute names.
func FromEnv() ConfigSource { return FromEnvVars(os.Environ()) }

// FromEnvVars is FromEnv over explicit "NAME=value" entries (for tests).
func FromEnvVars(environ []string) ConfigSource {
	props := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if isEnvCandidate(k) {
			props[k] = v
		}
	}
	return &mapSource{name: "env", ordinal: OrdinalEnv, props: props, env: true}
}

func isEnvCandidate(k string) bool {
	return strings.HasPrefix(k, "MP_MESSAGING_") || strings.HasPrefix(k, "MP_HEALTH_") ||
		strings.HasPrefix(k, "BABELQUEUE_MESSAGING_") || strings.HasPrefix(k, "mp.") ||
		strings.HasPrefix(k, "babelqueue.")
}

// FromPropertiesFile returns the properties file at path (ordinal 100). A
// missing file is an error of LoadConfig unless wrapped in Optional.
func FromPropertiesFile(path string) ConfigSource {
	f, err := os.Open(path) //nolint:gosec // the application names its own configuration file
	if err != nil {
		return &mapSource{name: path, ordinal: OrdinalProperties, err: fmt.Errorf("messaging: config %s: %w", path, err)}
	}
	defer func() { _ = f.Close() }()
	return FromProperties(path, f)
}

// FromProperties parses Java-style properties from r (ordinal 100): UTF-8;
// "#"/"!" comments; "=", ":" or white space separates key and value; a
// trailing "\" continues the line; escapes \\ \n \t \r \f \= \: \# \! \uXXXX
// and "\ "; a repeated key: the last wins, with a warning.
func FromProperties(name string, r io.Reader) ConfigSource {
	props, warns, err := parseProperties(r)
	if err != nil {
		err = fmt.Errorf("messaging: config %s: %w", name, err)
	}
	return &mapSource{name: name, ordinal: OrdinalProperties, props: props, warns: warns, err: err}
}

type ordinalSource struct {
	ConfigSource
	ordinal int
}

func (s ordinalSource) Ordinal() int { return s.ordinal }
func (s ordinalSource) envVariables() bool {
	e, ok := s.ConfigSource.(envSource)
	return ok && e.envVariables()
}

func (s ordinalSource) Warnings() []string {
	if w, ok := s.ConfigSource.(warner); ok {
		return w.Warnings()
	}
	return nil
}

// WithOrdinal returns s with ordinal n.
func WithOrdinal(s ConfigSource, n int) ConfigSource {
	return ordinalSource{ConfigSource: s, ordinal: n}
}

type optionalSource struct{ ConfigSource }

func (s optionalSource) Properties() (map[string]string, error) {
	p, err := s.ConfigSource.Properties()
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]string{}, nil
	}
	return p, err
}

func (s optionalSource) envVariables() bool {
	e, ok := s.ConfigSource.(envSource)
	return ok && e.envVariables()
}

func (s optionalSource) Warnings() []string {
	if w, ok := s.ConfigSource.(warner); ok {
		return w.Warnings()
	}
	return nil
}

// Optional makes a missing file no error.
func Optional(s ConfigSource) ConfigSource { return optionalSource{ConfigSource: s} }

// entry is one configuration value with its provenance.
type entry struct {
	value   string
	source  string
	ordinal int
	index   int // position of the source in LoadConfig's arguments
}

func (e entry) beats(o entry) bool {
	if e.ordinal != o.ordinal {
		return e.ordinal > o.ordinal
	}
	return e.index > o.index
}

// Config is the merged configuration of LoadConfig. Environment variables are
// kept unresolved until Start, which knows the channel and attribute names.
// The zero value is an empty configuration.
type Config struct {
	entries  map[string]entry
	env      []envVar
	warnings []string
}

type envVar struct {
	name string
	e    entry
}

// LoadConfig reads and merges sources: per key, the higher ordinal wins; for
// equal ordinals, the source passed later wins. Read errors of all sources are
// joined.
func LoadConfig(sources ...ConfigSource) (Config, error) {
	cfg := Config{entries: map[string]entry{}}
	var errs []error
	for i, s := range sources {
		if s == nil {
			continue
		}
		props, err := s.Properties()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if w, ok := s.(warner); ok {
			for _, msg := range w.Warnings() {
				cfg.warnings = append(cfg.warnings, s.Name()+": "+msg)
			}
		}
		isEnv := false
		if e, ok := s.(envSource); ok {
			isEnv = e.envVariables()
		}
		for _, k := range slices.Sorted(maps.Keys(props)) {
			e := entry{value: props[k], source: s.Name(), ordinal: s.Ordinal(), index: i}
			if isEnv {
				cfg.env = append(cfg.env, envVar{name: k, e: e})
				continue
			}
			putEntry(cfg.entries, k, e)
		}
	}
	return cfg, errors.Join(errs...)
}

// putEntry stores e under k unless the present entry beats it.
func putEntry(entries map[string]entry, k string, e entry) {
	if old, ok := entries[k]; ok && !e.beats(old) {
		return
	}
	entries[k] = e
}

// Get returns the value of key from the non-environment sources, or from an
// environment variable literally named key.
func (c Config) Get(key string) (string, bool) {
	e, ok := c.entries[key]
	return e.value, ok
}

// Keys returns the keys of the non-environment sources, sorted.
func (c Config) Keys() []string { return slices.Sorted(maps.Keys(c.entries)) }

// Warnings returns what the sources reported while being read.
func (c Config) Warnings() []string { return slices.Clone(c.warnings) }

// clone copies the entries, for resolution at Start.
func (c Config) clone() Config {
	return Config{entries: maps.Clone(c.entries), env: slices.Clone(c.env), warnings: slices.Clone(c.warnings)}
}

func parseProperties(r io.Reader) (map[string]string, []string, error) {
	props := map[string]string{}
	var warns []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	lineNo := 0
	var logical strings.Builder
	startLine := 0
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if !utf8.ValidString(line) {
			return nil, nil, fmt.Errorf("line %d: invalid UTF-8", lineNo)
		}
		trimmed := strings.TrimLeft(line, " \t\f")
		if logical.Len() == 0 {
			if trimmed == "" || trimmed[0] == '#' || trimmed[0] == '!' {
				continue
			}
			startLine = lineNo
		}
		if continued(trimmed) {
			logical.WriteString(trimmed[:len(trimmed)-1])
			continue
		}
		logical.WriteString(trimmed)
		k, v, err := splitProperty(logical.String())
		logical.Reset()
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", startLine, err)
		}
		if _, dup := props[k]; dup {
			warns = append(warns, fmt.Sprintf("line %d: key %q repeated, the last value wins", startLine, k))
		}
		props[k] = v
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("read: %w", err)
	}
	if logical.Len() > 0 {
		k, v, err := splitProperty(logical.String())
		if err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", startLine, err)
		}
		props[k] = v
	}
	return props, warns, nil
}

// continued reports an odd number of trailing backslashes.
func continued(s string) bool {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n%2 == 1
}

func splitProperty(s string) (key, value string, err error) {
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '\\' {
			i += 2
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			break
		}
		i++
	}
	rawKey := s[:min(i, len(s))]
	rest := ""
	if i < len(s) {
		rest = strings.TrimLeft(s[i:], " \t\f")
		if rest != "" && (rest[0] == '=' || rest[0] == ':') && (s[i] == ' ' || s[i] == '\t' || s[i] == '\f' || s[i] == rest[0]) {
			rest = strings.TrimLeft(rest[1:], " \t\f")
		}
	}
	if key, err = unescape(rawKey); err != nil {
		return "", "", err
	}
	if value, err = unescape(rest); err != nil {
		return "", "", err
	}
	return key, value, nil
}

func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break
		}
		switch s[i] {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("short \\u escape in %q", s)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("bad \\u escape in %q: %w", s, err)
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
