package messaging

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
)

// validate checks the graph against the resolved configuration and
// records producers and codecs in b. Problems go to res.
func (r *Runtime) validate(nodes []*node, res *resolution, b *builder) {
	add := func(p *Problem) { res.problems = append(res.problems, p) }
	consumers := map[string][]*node{}
	channels := map[string]bool{}
	badName := map[string]bool{}
	checkName := func(n *node, ch string) bool {
		if strings.TrimSpace(ch) == "" || strings.Contains(ch, ".") {
			if !badName[ch+"\x00"+n.name] {
				badName[ch+"\x00"+n.name] = true
				add(&Problem{
					Kind: InvalidChannelName, Channel: ch, Stage: n.name,
					Err: fmt.Errorf("messaging: channel name %q is blank or contains '.'", ch),
				})
			}
			return false
		}
		return true
	}
	for _, n := range nodes {
		n.ack = n.opts.ack
		if allowed, ok := allowedAcks[n.shape]; ok {
			if n.ack == 0 {
				n.ack = defaultAck[n.shape]
			} else if !slices.Contains(allowed, n.ack) {
				add(&Problem{
					Kind: InvalidAckStrategy, Stage: n.name, Channel: chanOf(n),
					Err: fmt.Errorf("messaging: ack strategy %v is not allowed here (allowed: %v)", n.ack, allowed),
				})
			}
		} else if n.ack != 0 {
			add(&Problem{
				Kind: InvalidAckStrategy, Stage: n.name, Channel: chanOf(n),
				Err: fmt.Errorf("messaging: ack strategy %v given to a stage without input", n.ack),
			})
		}
		if n.in != nil && checkName(n, n.in.channel) {
			consumers[n.in.channel] = append(consumers[n.in.channel], n)
			channels[n.in.channel] = true
		}
		if n.out != nil && checkName(n, n.out.channel) {
			b.producers[n.out.channel] = append(b.producers[n.out.channel], n)
			channels[n.out.channel] = true
		}
		if n.in != nil && n.out != nil && n.in.channel == n.out.channel {
			add(&Problem{
				Kind: SelfLoop, Channel: n.in.channel, Stage: n.name,
				Err: fmt.Errorf("messaging: %s reads and writes channel %q", n.name, n.in.channel),
			})
		}
	}
	for ch := range res.incoming {
		channels[ch] = true
	}
	for ch := range res.outgoing {
		channels[ch] = true
	}
	for _, ch := range slices.Sorted(maps.Keys(channels)) {
		in, out := res.incoming[ch], res.outgoing[ch]
		prods, cons := b.producers[ch], consumers[ch]
		nUp := len(prods)
		if in != nil {
			nUp++
		}
		nDown := len(cons)
		if out != nil {
			nDown++
		}
		if nUp == 0 {
			add(&Problem{
				Kind: NoUpstream, Channel: ch, Stage: names(cons),
				Err: fmt.Errorf("messaging: nothing produces channel %q (no stage, emitter or incoming connector)", ch),
			})
		}
		if nDown == 0 {
			p := &Problem{
				Kind: NoDownstream, Channel: ch, Stage: names(prods),
				Err: fmt.Errorf("messaging: nothing consumes channel %q (no stage, Channel or outgoing connector)", ch),
			}
			if in != nil {
				p.Connector = in.connector.Name()
			}
			add(p)
		}
		if nDown > 1 {
			add(&Problem{
				Kind: MultipleDownstreams, Channel: ch, Stage: names(cons),
				Err: fmt.Errorf("messaging: channel %q has %d consumers (channels are unicast)", ch, nDown),
			})
		}
		if nUp > 1 {
			merged := true
			for _, c := range cons {
				merged = merged && c.opts.merge
			}
			if out != nil {
				merged = merged && out.merge
			}
			if !merged && nDown > 0 {
				add(&Problem{
					Kind: MultipleUpstreams, Channel: ch, Stage: names(prods),
					Err: fmt.Errorf("messaging: channel %q has %d upstreams and its consumer does not merge", ch, nUp),
				})
			}
		}
		// types
		if in != nil {
			for _, c := range cons {
				r.bindCodec(res, b, c, in, c.in.typ)
			}
		}
		if out != nil {
			for _, p := range prods {
				r.bindCodec(res, b, p, out, p.out.typ)
			}
		}
		if in == nil && out == nil {
			var t reflect.Type
			var first *node
			for _, p := range prods {
				if t == nil {
					t, first = p.out.typ, p
				} else if p.out.typ != t {
					add(typeMismatch(ch, first, t, p, p.out.typ))
				}
			}
			for _, c := range cons {
				if t == nil {
					t, first = c.in.typ, c
				} else if c.in.typ != t {
					add(typeMismatch(ch, first, t, c, c.in.typ))
				}
			}
		}
	}
	findCycles(nodes, add)
}

func chanOf(n *node) string {
	if n.in != nil {
		return n.in.channel
	}
	if n.out != nil {
		return n.out.channel
	}
	return ""
}

func typeMismatch(ch string, a *node, at reflect.Type, b *node, bt reflect.Type) *Problem {
	return &Problem{
		Kind: TypeMismatch, Channel: ch, Stage: b.name,
		Err: fmt.Errorf("messaging: channel %q carries %v at %s but %v at %s", ch, at, a.name, bt, b.name),
	}
}

func names(ns []*node) string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.name
	}
	return strings.Join(out, ", ")
}

// bindCodec finds the codec of node n's port on connector channel c.
func (r *Runtime) bindCodec(res *resolution, b *builder, n *node, c *chanCfg, t reflect.Type) {
	codec := n.opts.codec
	if codec == nil {
		name := c.codec
		if name == "" {
			name = defaultCodecFor(t)
		}
		if name == "" {
			res.problems = append(res.problems, &Problem{
				Kind: MissingCodec, Channel: c.channel, Stage: n.name, Connector: c.connector.Name(), Attribute: AttrCodec,
				Err: fmt.Errorf("messaging: %v needs a codec on %s channel %q (attribute codec or WithCodec)", t, c.dir, c.channel),
			})
			return
		}
		var ok bool
		if codec, ok = r.codecs[name]; !ok {
			res.problems = append(res.problems, &Problem{
				Kind: MissingCodec, Channel: c.channel, Stage: n.name, Connector: c.connector.Name(), Attribute: AttrCodec,
				Err: fmt.Errorf("messaging: codec %q is not registered", name),
			})
			return
		}
	}
	if !codec.Supports(t) {
		res.problems = append(res.problems, &Problem{
			Kind: TypeMismatch, Channel: c.channel, Stage: n.name, Connector: c.connector.Name(),
			Err: fmt.Errorf("messaging: codec %q does not support %v", codec.Name(), t),
		})
		return
	}
	b.codecs[n] = codec
}

// findCycles reports processor cycles (a stage reading its own output
// through other processors).
func findCycles(nodes []*node, add func(*Problem)) {
	next := map[string][]*node{}
	for _, n := range nodes {
		if n.in != nil && n.out != nil && n.in.channel != n.out.channel {
			next[n.in.channel] = append(next[n.in.channel], n)
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var path []*node
	var visit func(ch string)
	visit = func(ch string) {
		color[ch] = grey
		for _, n := range next[ch] {
			path = append(path, n)
			switch color[n.out.channel] {
			case grey:
				var cyc []*node
				for i := len(path) - 1; i >= 0; i-- {
					cyc = append(cyc, path[i])
					if path[i].in.channel == n.out.channel {
						break
					}
				}
				slices.Reverse(cyc)
				add(&Problem{
					Kind: SelfLoop, Channel: n.out.channel, Stage: names(cyc),
					Err: fmt.Errorf("messaging: processors form a cycle through channel %q", n.out.channel),
				})
			case white:
				visit(n.out.channel)
			}
			path = path[:len(path)-1]
		}
		color[ch] = black
	}
	for _, ch := range slices.Sorted(maps.Keys(next)) {
		if color[ch] == white {
			visit(ch)
		}
	}
}
