package messaging

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// chanCfg is the resolved configuration of one connector channel.
type chanCfg struct {
	channel   string
	dir       Direction
	connector Connector
	cfg       *channelConfig
	codec     string // the "codec" attribute, or ""
	merge     bool
	health    bool
}

// resolution is the resolved configuration of every channel: sources merged
// per key, channel attributes flattened over connector ones and defaults,
// and validated against the declared attributes.
type resolution struct {
	cfg      Config // with the environment resolved
	incoming map[string]*chanCfg
	outgoing map[string]*chanCfg
	problems []*Problem
	warnings []*Problem
	strict   bool
}

func (res *resolution) report(strictErr bool, p *Problem) {
	if strictErr {
		res.problems = append(res.problems, p)
	} else {
		res.warnings = append(res.warnings, p)
	}
}

// normalizeEnv is the MicroProfile mapping: upper case, non-alphanumerics → '_'.
func normalizeEnv(key string) string {
	var b strings.Builder
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z':
			b.WriteRune(r - 'a' + 'A')
		case (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}

// resolveConfig resolves environment variables against the known names,
// then flattens and validates every connector channel.
func (r *Runtime) resolveConfig(channels []string) *resolution {
	res := &resolution{cfg: r.cfg.clone(), incoming: map[string]*chanCfg{}, outgoing: map[string]*chanCfg{}}
	if res.cfg.entries == nil {
		res.cfg.entries = map[string]entry{}
	}
	// A variable literally named like a key comes first, so that it beats one
	// mapped to the same key (MicroProfile Config's order): putEntry keeps the
	// first of equal entries.
	slices.SortStableFunc(res.cfg.env, func(a, b envVar) int { return envRank(a) - envRank(b) })
	// strict may itself come from the environment: resolve it first.
	for _, ev := range res.cfg.env {
		if ev.name == KeyStrict || normalizeEnv(KeyStrict) == ev.name {
			putEntry(res.cfg.entries, KeyStrict, ev.e)
		}
	}
	res.strict = res.cfg.entries[KeyStrict].value == "true"
	r.resolveEnv(res, channels)

	chAttrs := map[Direction]map[string]map[string]entry{Incoming: {}, Outgoing: {}}
	connAttrs := map[string]map[string]entry{}
	names := slices.Sorted(maps.Keys(r.connectors))
	for _, k := range res.cfg.Keys() {
		e := res.cfg.entries[k]
		var dir Direction
		var rest string
		switch {
		case strings.HasPrefix(k, prefixIncoming):
			dir, rest = Incoming, k[len(prefixIncoming):]
		case strings.HasPrefix(k, prefixOutgoing):
			dir, rest = Outgoing, k[len(prefixOutgoing):]
		case strings.HasPrefix(k, prefixConnector):
			rest = k[len(prefixConnector):]
			best := ""
			for _, n := range names {
				if strings.HasPrefix(rest, n+".") && len(n) > len(best) {
					best = n
				}
			}
			if best == "" {
				res.report(res.strict, &Problem{Kind: UnknownConnector, Attribute: k, Err: fmt.Errorf("messaging: key %q names no registered connector", k)})
				continue
			}
			if connAttrs[best] == nil {
				connAttrs[best] = map[string]entry{}
			}
			connAttrs[best][rest[len(best)+1:]] = e
			continue
		default:
			continue
		}
		ch, attr, ok := strings.Cut(rest, ".")
		if ch == "" || !ok || attr == "" {
			res.problems = append(res.problems, &Problem{Kind: InvalidChannelName, Channel: ch, Attribute: k, Err: fmt.Errorf("messaging: key %q has no channel or attribute", k)})
			continue
		}
		if chAttrs[dir][ch] == nil {
			chAttrs[dir][ch] = map[string]entry{}
		}
		chAttrs[dir][ch][attr] = e
	}
	for _, dir := range []Direction{Incoming, Outgoing} {
		for _, ch := range slices.Sorted(maps.Keys(chAttrs[dir])) {
			if c := r.resolveChannel(res, dir, ch, chAttrs[dir][ch], connAttrs); c != nil {
				if dir == Incoming {
					res.incoming[ch] = c
				} else {
					res.outgoing[ch] = c
				}
			}
		}
	}
	return res
}

func (r *Runtime) resolveChannel(res *resolution, dir Direction, ch string, attrs map[string]entry, connAttrs map[string]map[string]entry) *chanCfg {
	if e, ok := attrs[AttrEnabled]; ok && e.value == "false" {
		return nil
	}
	connEntry, ok := attrs[AttrConnector]
	if !ok {
		res.problems = append(res.problems, &Problem{
			Kind: MissingAttribute, Channel: ch, Attribute: AttrConnector,
			Err: fmt.Errorf("messaging: %s channel %q is configured without a connector", dir, ch),
		})
		return nil
	}
	name := connEntry.value
	conn, ok := r.connectors[name]
	if ok {
		switch dir {
		case Incoming:
			_, ok = conn.(IncomingConnector)
		case Outgoing:
			_, ok = conn.(OutgoingConnector)
		}
	}
	if !ok {
		res.problems = append(res.problems, &Problem{
			Kind: UnknownConnector, Channel: ch, Connector: name,
			Err: fmt.Errorf("messaging: no %s connector %q is registered", dir, name),
		})
		return nil
	}
	f := flatten(ch, name, dir, conn.Attributes(), connAttrs[name], attrs)
	for _, k := range f.unknown {
		res.report(res.strict, &Problem{
			Kind: UnknownAttribute, Channel: ch, Connector: name, Attribute: k,
			Err: fmt.Errorf("messaging: connector %q does not declare attribute %q", name, k),
		})
	}
	for _, k := range f.deprecated {
		res.warnings = append(res.warnings, &Problem{
			Kind: InvalidAttribute, Channel: ch, Connector: name, Attribute: k,
			Err: fmt.Errorf("messaging: attribute %q is deprecated", k),
		})
	}
	c, values := f.cfg, f.cfg.values
	for _, n := range slices.Sorted(maps.Keys(values)) {
		a, ok := c.decl[n]
		if !ok {
			continue // channel-name
		}
		if err := a.validate(values[n].value); err != nil {
			res.problems = append(res.problems, &Problem{
				Kind: InvalidAttribute, Channel: ch, Connector: name, Attribute: n,
				Err: fmt.Errorf("messaging: attribute %q: %w", n, err),
			})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(f.declared)) {
		if _, ok := values[n]; !ok && f.declared[n].Mandatory {
			res.problems = append(res.problems, &Problem{
				Kind: MissingAttribute, Channel: ch, Connector: name, Attribute: n,
				Err: fmt.Errorf("messaging: connector %q requires attribute %q", name, n),
			})
		}
	}
	return &chanCfg{
		channel: ch, dir: dir, connector: conn, cfg: c,
		codec:  values[AttrCodec].value,
		merge:  values[AttrMerge].value == "true",
		health: values[AttrHealthEnabled].value != "false",
	}
}

// flattened is one channel's configuration after flattening: channel
// attributes, then connector-level attributes, then declared defaults.
type flattened struct {
	cfg        *channelConfig
	declared   map[string]Attribute // the connector's attributes of the direction
	unknown    []string             // channel-level keys neither declared nor reserved, sorted
	deprecated []string             // keys of deprecated attributes that were set
}

// flatten merges the attributes of one channel: declared and reserved defaults <
// connector level < channel level (channel beats connector whatever the ordinals),
// aliases mapped to their names. Only attributes the connector declares for the
// direction and the runtime's reserved attributes are kept, so every connector
// sees "connector", "channel-name", "codec", "enabled", "health-enabled" and, outgoing,
// "merge", whether or not it declares them; a declaration of a reserved name wins. Both
// the resolver and NewChannelConfig use it.
func flatten(ch, name string, dir Direction, attributes []Attribute, connLevel, chLevel map[string]entry) *flattened {
	f := &flattened{declared: map[string]Attribute{}}
	alias := map[string]string{}
	for _, a := range attributes {
		if a.applies(dir) {
			f.declared[a.Name] = a
			if a.Alias != "" {
				alias[a.Alias] = a.Name
			}
		}
	}
	all := map[string]Attribute{}
	for _, a := range runtimeAttributes {
		if a.applies(dir) {
			all[a.Name] = a
		}
	}
	maps.Copy(all, f.declared)
	values := map[string]attrValue{}
	for n, a := range all {
		if a.Default != "" {
			values[n] = attrValue{value: a.Default, origin: "default"}
		}
	}
	apply := func(level string, m map[string]entry) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			e := m[k]
			n := k
			if canon, ok := alias[k]; ok {
				n = canon
			}
			a, known := all[n]
			if !known {
				if level == "channel" {
					f.unknown = append(f.unknown, k)
				}
				continue
			}
			if a.Deprecated {
				f.deprecated = append(f.deprecated, k)
			}
			origin := level
			if e.source != "" {
				origin = fmt.Sprintf("%s (%s)", level, e.source)
			}
			values[n] = attrValue{value: e.value, origin: origin}
		}
	}
	apply("connector", connLevel)
	apply("channel", chLevel)
	values[AttrChannelName] = attrValue{value: ch, origin: "runtime"}
	if v, ok := values[AttrConnector]; !ok || v.value != name {
		values[AttrConnector] = attrValue{value: name, origin: "runtime"}
	}
	f.cfg = &channelConfig{channel: ch, connector: name, dir: dir, values: values, decl: all}
	return f
}

// envRank orders a variable literally named like a key (0) before one named
// after a normalised key (1).
func envRank(ev envVar) int {
	if strings.Contains(ev.name, ".") {
		return 0
	}
	return 1
}

// resolveEnv maps environment variables onto keys built from known names only.
func (r *Runtime) resolveEnv(res *resolution, channels []string) {
	if len(res.cfg.env) == 0 {
		return
	}
	knownCh := map[string]bool{}
	for _, ch := range channels {
		knownCh[ch] = true
	}
	attrs := map[string]bool{}
	for _, a := range runtimeAttributes {
		attrs[a.Name] = true
	}
	for _, c := range r.connectors {
		for _, a := range c.Attributes() {
			attrs[a.Name] = true
			if a.Alias != "" {
				attrs[a.Alias] = true
			}
		}
	}
	for _, k := range res.cfg.Keys() {
		for _, p := range []string{prefixIncoming, prefixOutgoing} {
			if rest, ok := strings.CutPrefix(k, p); ok {
				if ch, attr, ok := strings.Cut(rest, "."); ok {
					knownCh[ch] = true
					attrs[attr] = true
				}
			}
		}
	}
	candidates := map[string][]string{} // normalised → keys
	addKey := func(k string) {
		n := normalizeEnv(k)
		if !slices.Contains(candidates[n], k) {
			candidates[n] = append(candidates[n], k)
		}
	}
	for _, k := range globalKeys {
		addKey(k)
	}
	for ch := range knownCh {
		for a := range attrs {
			addKey(prefixIncoming + ch + "." + a)
			addKey(prefixOutgoing + ch + "." + a)
		}
	}
	for name := range r.connectors {
		for a := range attrs {
			addKey(prefixConnector + name + "." + a)
		}
	}
	all := slices.Sorted(maps.Keys(candidates))
	for _, ev := range res.cfg.env {
		if envRank(ev) == 0 { // literally a key
			putEntry(res.cfg.entries, ev.name, ev.e)
			continue
		}
		keys := candidates[ev.name]
		switch len(keys) {
		case 1:
			putEntry(res.cfg.entries, keys[0], ev.e)
		case 0:
			closest := closestKey(ev.name, all, candidates)
			res.report(res.strict, &Problem{
				Kind: UnresolvedEnvKey, Attribute: ev.name,
				Err: fmt.Errorf("messaging: environment variable %s matches no known key (closest: %s)", ev.name, closest),
			})
		default:
			slices.Sort(keys)
			res.problems = append(res.problems, &Problem{
				Kind: UnresolvedEnvKey, Attribute: ev.name,
				Err: fmt.Errorf("messaging: environment variable %s matches several keys: %s", ev.name, strings.Join(keys, ", ")),
			})
		}
	}
}

func closestKey(name string, normalized []string, candidates map[string][]string) string {
	best, bestD := "", -1
	for _, n := range normalized {
		if d := levenshtein(name, n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return "none"
	}
	return candidates[best][0]
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
