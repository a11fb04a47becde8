package pulsartest

// Non-persistent topics (non-persistent://tenant/namespace/name) keep nothing: a message goes to the consumers
// connected when it arrives and that have permits for it, and is dropped for everybody else; subscriptions
// start at the end of the topic, live only while they have consumers and never have a backlog.

// dropUndeliveredLocked runs after a non-persistent topic's dispatch pass: what a subscription could not hand
// out now is skipped (counted as acknowledged), and entries no subscription still needs are released.
func (t *topic) dropUndeliveredLocked() {
	upTo := t.next - 1
	for _, s := range t.subs {
		for id := max(s.readPos, s.markDelete+1); id < t.next; id++ {
			s.acked[id] = struct{}{}
		}
		s.readPos = t.next
		s.advanceMarkDelete()
		upTo = min(upTo, s.markDelete)
		for _, k := range s.consumers {
			for id := range k.pending {
				upTo = min(upTo, id-1)
			}
		}
	}
	for len(t.entries) > 0 && t.first <= upTo {
		t.size -= int64(len(t.entries[0].raw))
		t.entries[0] = nil
		t.entries = t.entries[1:]
		t.first++
	}
}
