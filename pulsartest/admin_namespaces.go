package pulsartest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Admin endpoints beyond topics and partitioned topics, with Apache Pulsar's status codes and JSON shapes:
// here their registration and the ones that manage (namespaces, partition updates, unload, trim, lookup);
// the read-only ones (schemas, message by id, stats) are in admin_inspect.go.

// namespaceSet is the admin subset's record of namespaces. Namespaces exist implicitly for the binary
// protocol (a producer creates its topic in any namespace); the REST API answers create, delete and list as
// Pulsar does: public/default exists from the start, a namespace that holds topics exists, creating an
// existing one is 409 and deleting a missing one 404.
type namespaceSet struct {
	mu      sync.Mutex
	created map[string]bool
}

var builtinNamespaces = []string{"public/default", "public/functions", "pulsar/system"}

func (a *adminServer) registerMore(mux *http.ServeMux, base string) {
	a.ns.created = map[string]bool{}
	for _, n := range builtinNamespaces {
		a.ns.created[n] = true
	}
	mux.HandleFunc("POST "+base+"/{topic}/partitions", a.updatePartitions)
	mux.HandleFunc("GET "+base+"/{topic}/stats", a.topicStats)
	mux.HandleFunc("GET "+base+"/{topic}/partitioned-stats", a.partitionedStats)
	mux.HandleFunc("GET "+base+"/{topic}/ledger/{ledger}/entry/{entry}", a.messageByID)
	mux.HandleFunc("PUT "+base+"/{topic}/unload", a.unload)
	mux.HandleFunc("POST "+base+"/{topic}/trim", a.trim)
	const nsBase = "/admin/v2/namespaces/{tenant}/{namespace}"
	mux.HandleFunc("PUT "+nsBase, a.createNamespace)
	mux.HandleFunc("DELETE "+nsBase, a.deleteNamespace)
	mux.HandleFunc("GET "+nsBase+"/topics", a.namespaceTopics)
	mux.HandleFunc("GET /admin/v2/namespaces/{tenant}", a.listNamespaces)
	for _, p := range []string{"/lookup/v2/topic/{domain}/{tenant}/{namespace}/{topic}", "/lookup/v2/destination/{domain}/{tenant}/{namespace}/{topic}"} {
		mux.HandleFunc("GET "+p, a.lookup)
	}
	const schema = "/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema"
	mux.HandleFunc("GET "+schema, a.getSchema)
	mux.HandleFunc("GET "+schema+"/{version}", a.getSchema)
	mux.HandleFunc("DELETE "+schema, a.deleteSchema)
	a.registerQuota(mux) // backlog_quota.go
}

func nsOf(r *http.Request) string { return r.PathValue("tenant") + "/" + r.PathValue("namespace") }

// nsExists reports whether the namespace was created (or is built in) or holds topics.
func (a *adminServer) nsExists(ns string) bool {
	a.ns.mu.Lock()
	ok := a.ns.created[ns]
	a.ns.mu.Unlock()
	return ok || len(a.b.topicsOfNamespace(ns)) > 0 || len(a.partitionedOf(ns)) > 0
}

func (a *adminServer) partitionedOf(ns string) []string {
	a.b.mu.Lock()
	defer a.b.mu.Unlock()
	var out []string
	for name := range a.b.partitioned {
		if namespaceOf(name) == ns {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

func (a *adminServer) createNamespace(w http.ResponseWriter, r *http.Request) {
	ns := nsOf(r)
	if a.nsExists(ns) {
		writeReason(w, http.StatusConflict, "Namespace already exists")
		return
	}
	a.ns.mu.Lock()
	a.ns.created[ns] = true
	a.ns.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (a *adminServer) deleteNamespace(w http.ResponseWriter, r *http.Request) {
	ns := nsOf(r)
	if !a.nsExists(ns) {
		writeReason(w, http.StatusNotFound, "Namespace "+ns+" does not exist.") // sic, Pulsar 4.0's reason here
		return
	}
	force := r.URL.Query().Get("force") == "true"
	topics := a.b.topicsOfNamespace(ns)
	if len(topics) > 0 || len(a.partitionedOf(ns)) > 0 {
		if !force {
			writeReason(w, http.StatusConflict, "Cannot delete non empty namespace")
			return
		}
		for _, name := range append(a.partitionedOf(ns), topics...) {
			if err := a.b.DeleteTopic(name); err != nil && !errors.Is(err, ErrTopicNotFound) {
				writeErr(w, err)
				return
			}
		}
	}
	a.ns.mu.Lock()
	delete(a.ns.created, ns)
	a.ns.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (a *adminServer) listNamespaces(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant") + "/"
	set := map[string]bool{}
	a.ns.mu.Lock()
	for n := range a.ns.created {
		set[n] = true
	}
	a.ns.mu.Unlock()
	for _, t := range a.b.Topics() {
		set[namespaceOf(t)] = true
	}
	var out []string
	for n := range set {
		if strings.HasPrefix(n, tenant) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	writeJSON(w, http.StatusOK, nonNil(out))
}

// namespaceTopics lists the namespace's topics (partitions, not partitioned names), like Pulsar's
// GET /admin/v2/namespaces/{tenant}/{namespace}/topics; mode=NON_PERSISTENT lists none.
func (a *adminServer) namespaceTopics(w http.ResponseWriter, r *http.Request) {
	ns := nsOf(r)
	if !a.nsExists(ns) {
		writeReason(w, http.StatusNotFound, "Namespace does not exist")
		return
	}
	topics := a.b.topicsOfNamespace(ns)
	mode := strings.ToUpper(r.URL.Query().Get("mode"))
	var out []string
	for _, t := range topics {
		persistent := strings.HasPrefix(t, "persistent://")
		if mode == "ALL" || (mode == "NON_PERSISTENT" && !persistent) || (mode != "NON_PERSISTENT" && persistent) {
			out = append(out, t)
		}
	}
	writeJSON(w, http.StatusOK, nonNil(out))
}

// partitionsBody parses a partition count: a bare JSON number (POST …/partitions, older clients) or the
// partitioned-topic metadata object {"partitions":N,"properties":{…}} that pulsaradmin sends.
func partitionsBody(r *http.Request) (int, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64*1024))
	if err != nil {
		return 0, fmt.Errorf("pulsartest: read body: %w", err)
	}
	s := strings.TrimSpace(string(body))
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	var meta struct {
		Partitions *int `json:"partitions"`
	}
	if err := json.Unmarshal(body, &meta); err != nil || meta.Partitions == nil {
		return 0, fmt.Errorf("%w: partition count %q: want a number or {\"partitions\":N}", ErrInvalidTopic, s)
	}
	return *meta.Partitions, nil
}

// updatePartitions increases the partition count of a partitioned topic (POST …/partitions).
func (a *adminServer) updatePartitions(w http.ResponseWriter, r *http.Request) {
	n, err := partitionsBody(r)
	if err != nil {
		writeReason(w, http.StatusBadRequest, err.Error())
		return
	}
	have := a.b.partitions(topicOf(r))
	err = a.b.UpdatePartitionedTopic(topicOf(r), n)
	switch { // Pulsar 4.0's answers
	case errors.Is(err, ErrTopicNotFound):
		writeReason(w, http.StatusConflict, "Topic "+topicOf(r)+" is not the partitioned topic.")
	case errors.Is(err, ErrInvalidTopic) && n < have:
		writeReason(w, http.StatusUnprocessableEntity, fmt.Sprintf("Desired partitions %d can't be less than the current partitions %d.", n, have))
	default:
		writeErr(w, err)
	}
}

// UpdatePartitionedTopic raises the partition count of a partitioned topic to n, creating the new
// partitions; clients find them through their partition-metadata polling. A smaller n fails with
// ErrInvalidTopic, as Pulsar refuses to shrink a partitioned topic.
func (b *Broker) UpdatePartitionedTopic(name string, n int) error {
	fq, err := normalizeTopic(name)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	have, ok := b.partitioned[fq]
	switch {
	case !ok:
		return fmt.Errorf("%w: partitioned topic %s", ErrTopicNotFound, fq)
	case n < have:
		return fmt.Errorf("%w: expect partitions %d greater than current partitions %d", ErrInvalidTopic, n, have)
	}
	b.partitioned[fq] = n
	for i := have; i < n; i++ {
		p := fq + partitionSuffix + strconv.Itoa(i)
		if _, ok := b.topics[p]; !ok {
			b.createTopicLocked(p)
		}
	}
	return nil
}

// existingTopic returns the request's topic, or answers the request itself (400 for a bad
// name, 404 "Topic … not found" as Pulsar does) and returns false.
func (a *adminServer) existingTopic(w http.ResponseWriter, r *http.Request) (string, bool) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		writeErr(w, err)
		return "", false
	}
	if len(a.b.topicsFor(fq)) == 0 {
		writeReason(w, http.StatusNotFound, "Topic "+fq+" not found")
		return "", false
	}
	return fq, true
}

func (a *adminServer) unload(w http.ResponseWriter, r *http.Request) {
	fq, ok := a.existingTopic(w, r)
	if !ok {
		return
	}
	a.b.UnloadTopic(fq)
	w.WriteHeader(http.StatusNoContent)
}

// trim answers Pulsar's POST …/trim (trimTopic): it deletes what no durable subscription needs and the retention
// policy does not keep, of the topic or of every partition of a partitioned one (Broker.Trim). As Pulsar 4.0
// does, it answers 200 with an empty body (not 204), and 404 for a topic that does not exist.
func (a *adminServer) trim(w http.ResponseWriter, r *http.Request) {
	fq, ok := a.existingTopic(w, r)
	if !ok {
		return
	}
	a.b.Trim(fq)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}

// lookup answers Pulsar's HTTP lookup: this broker owns every topic.
func (a *adminServer) lookup(w http.ResponseWriter, r *http.Request) {
	if d := r.PathValue("domain"); d != "persistent" && d != "non-persistent" {
		writeReason(w, http.StatusPreconditionFailed, "pulsartest: invalid topic domain "+d)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"brokerUrl": a.b.url, "brokerUrlTls": a.b.tlsURL(), "httpUrl": a.url, "httpUrlTls": a.tlsURL(),
		"nativeUrl": a.b.url,
	})
}
