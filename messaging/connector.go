package messaging

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/babelqueue/babelqueue-go-pulsar/reactive"
)

// Direction is the direction of a connector channel.
type Direction int

// The directions; 0 denotes an internal channel in ChannelHealth.
const (
	Incoming Direction = iota + 1
	Outgoing
)

// String returns "incoming", "outgoing" or "internal".
func (d Direction) String() string {
	switch d {
	case Incoming:
		return "incoming"
	case Outgoing:
		return "outgoing"
	default:
		return "internal"
	}
}

// AttrType is the declared type of a connector attribute.
type AttrType int

// The attribute types.
const (
	AttrString AttrType = iota
	AttrBool
	AttrInt
	AttrInt64
	AttrDuration
	AttrEnum
	AttrList
)

// Attribute declares a channel attribute a connector reads.
type Attribute struct {
	Name        string
	Default     string // "" means no default
	Alias       string // an alternative key, e.g. a deprecated name
	Description string
	Type        AttrType
	Directions  []Direction // empty: both
	Enum        []string    // for AttrEnum
	Mandatory   bool
	Deprecated  bool
}

func (a Attribute) applies(d Direction) bool {
	return len(a.Directions) == 0 || slices.Contains(a.Directions, d)
}

// validate checks v against the declared type and enum.
func (a Attribute) validate(v string) error {
	var err error
	switch a.Type {
	case AttrBool:
		_, err = strconv.ParseBool(v)
	case AttrInt:
		_, err = strconv.Atoi(v)
	case AttrInt64:
		_, err = strconv.ParseInt(v, 10, 64)
	case AttrDuration:
		_, err = parseDuration(v)
	case AttrEnum:
		if !slices.Contains(a.Enum, v) {
			err = fmt.Errorf("%q is not one of %s", v, strings.Join(a.Enum, ","))
		}
	case AttrString, AttrList:
	}
	return err
}

// Connector is a named factory of sources and/or sinks. Attributes lists every
// attribute it reads: the runtime passes no others.
type Connector interface {
	Name() string
	Attributes() []Attribute
}

// IncomingConnector creates the Source of an incoming channel.
type IncomingConnector interface {
	Connector
	NewSource(ctx context.Context, c ChannelConfig) (Source, error)
}

// OutgoingConnector creates the Sink of an outgoing channel.
type OutgoingConnector interface {
	Connector
	NewSink(ctx context.Context, c ChannelConfig) (Sink, error)
}

// ConnectorCloser is an optional Connector capability: shared resources
// released at the end of Shutdown.
type ConnectorCloser interface {
	Close(ctx context.Context) error
}

// Source is the publisher of an incoming connector channel. It is unicast;
// subscribing to a closed Source gives OnSubscribe then OnError(ErrClosed).
// Close stops receiving, waits for in-flight settlements until ctx, then
// releases its resources.
type Source interface {
	reactive.Publisher[Message[[]byte]]
	Health() ChannelHealth
	Close(ctx context.Context) error
}

// Sink is the subscriber of an outgoing connector channel. Close flushes until
// ctx and nacks unconfirmed messages with ErrClosed.
type Sink interface {
	reactive.Subscriber[Message[[]byte]]
	Health() ChannelHealth
	Close(ctx context.Context) error
}

// ChannelConfig is the configuration a connector receives for one channel:
// the attributes it declared for the direction (channel > connector level >
// declared default), the runtime's reserved attributes whether declared or not
// ("connector", "codec", "enabled", "health-enabled", outgoing "merge"), and
// "channel-name".
type ChannelConfig interface {
	Channel() string
	Connector() string
	Direction() Direction
	// Lookup returns the attribute's value: channel attribute, else connector
	// attribute, else the declared default.
	Lookup(attr string) (string, bool)
	// Origin tells where the value came from: "channel", "connector" or
	// "default", with the source name, e.g. "channel (env)".
	Origin(attr string) string
	// Keys returns the attribute names that have a value, sorted.
	Keys() []string
}

// Reserved attribute names, valid with any connector.
const (
	AttrChannelName   = "channel-name"
	AttrConnector     = "connector"
	AttrEnabled       = "enabled"
	AttrCodec         = "codec"
	AttrHealthEnabled = "health-enabled"
	AttrMerge         = "merge"
)

// runtimeAttributes are reserved by the runtime for every channel.
var runtimeAttributes = []Attribute{
	{Name: AttrConnector, Type: AttrString, Mandatory: true, Description: "connector name"},
	{Name: AttrEnabled, Type: AttrBool, Default: "true", Description: "false: the channel's configuration is ignored"},
	{Name: AttrCodec, Type: AttrString, Description: "payload codec"},
	{Name: AttrHealthEnabled, Type: AttrBool, Default: "true", Description: "part of the health verdict"},
	{Name: AttrMerge, Type: AttrBool, Default: "false", Directions: []Direction{Outgoing}, Description: "several upstreams allowed"},
}

type attrValue struct {
	value  string
	origin string
}

type channelConfig struct {
	channel   string
	connector string
	dir       Direction
	values    map[string]attrValue
	decl      map[string]Attribute
}

// NewChannelConfig returns the ChannelConfig the runtime would pass to a connector
// declaring decl for a channel configured with attrs (channel attributes), for connector
// tests. It flattens like the resolver: declared and reserved defaults,
// aliases mapped to their names, only the attributes decl declares for d plus the
// runtime's reserved ones ("connector", "channel-name", "codec", "enabled",
// "health-enabled", outgoing "merge"), whether declared or not. Unlike Start it cannot
// report problems: unknown attributes are dropped (the resolver warns, or fails in
// strict mode) and values are checked only when read with Attr.
func NewChannelConfig(channel, connector string, d Direction, attrs map[string]string, decl []Attribute) ChannelConfig {
	level := make(map[string]entry, len(attrs))
	for k, v := range attrs {
		level[k] = entry{value: v}
	}
	return flatten(channel, connector, d, decl, nil, level).cfg
}

func (c *channelConfig) Channel() string      { return c.channel }
func (c *channelConfig) Connector() string    { return c.connector }
func (c *channelConfig) Direction() Direction { return c.dir }

func (c *channelConfig) Lookup(attr string) (string, bool) {
	v, ok := c.values[attr]
	return v.value, ok
}

func (c *channelConfig) Origin(attr string) string { return c.values[attr].origin }

func (c *channelConfig) Keys() []string {
	keys := make([]string, 0, len(c.values))
	for k := range c.values {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (c *channelConfig) declared(attr string) (Attribute, bool) {
	a, ok := c.decl[attr]
	return a, ok
}

// AttrValue is the set of Go types Attr parses into.
type AttrValue interface {
	string | bool | int | int64 | time.Duration | []string
}

// Attr returns the attribute parsed as V. An absent attribute gives an error
// wrapping ErrMissingAttribute; a value that does not parse, or is not one of a
// declared enum, an error wrapping ErrInvalidAttribute. Durations accept Go
// syntax ("1.5s") or a plain number of milliseconds; lists are comma separated.
func Attr[V AttrValue](c ChannelConfig, name string) (V, error) {
	var zero V
	raw, ok := c.Lookup(name)
	if !ok {
		return zero, fmt.Errorf("%w: %q of channel %q", ErrMissingAttribute, name, c.Channel())
	}
	if d, ok := c.(interface {
		declared(string) (Attribute, bool)
	}); ok {
		if a, ok := d.declared(name); ok && a.Type == AttrEnum {
			if err := a.validate(raw); err != nil {
				return zero, fmt.Errorf("%w: %q of channel %q: %w", ErrInvalidAttribute, name, c.Channel(), err)
			}
		}
	}
	var out any
	var err error
	switch any(zero).(type) {
	case string:
		out = raw
	case bool:
		out, err = strconv.ParseBool(raw)
	case int:
		out, err = strconv.Atoi(raw)
	case int64:
		out, err = strconv.ParseInt(raw, 10, 64)
	case time.Duration:
		out, err = parseDuration(raw)
	case []string:
		out = splitList(raw)
	}
	if err != nil {
		return zero, fmt.Errorf("%w: %q of channel %q: %w", ErrInvalidAttribute, name, c.Channel(), err)
	}
	v, _ := out.(V)
	return v, nil
}

func parseDuration(s string) (time.Duration, error) {
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(n) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("messaging: duration %q: %w", s, err)
	}
	return d, nil
}

func splitList(s string) []string {
	var out []string
	for p := range strings.SplitSeq(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
