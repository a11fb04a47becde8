package pulsartest

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// adminServer serves the subset of Pulsar's admin REST API (v2) that tests need for topics.
type adminServer struct {
	b   *Broker
	ln  net.Listener
	srv *http.Server
	url string

	tlsSrv   *http.Server // WithAdminTLS (tls.go)
	httpsURL string
	ns       namespaceSet // admin_namespaces.go
}

// AdminURL returns the base URL of the admin REST subset ("http://host:port"), or "" without WithAdminHTTP.
func (b *Broker) AdminURL() string {
	if b.admin == nil {
		return ""
	}
	return b.admin.url
}

func (b *Broker) startAdmin(ln net.Listener) {
	a := &adminServer{b: b, ln: ln}
	if ln != nil { // nil: HTTPS only (WithAdminTLS)
		a.url = "http://" + ln.Addr().String()
	}
	mux := http.NewServeMux()
	const base = "/admin/v2/persistent/{tenant}/{namespace}"
	mux.HandleFunc("GET "+base, a.listTopics)
	mux.HandleFunc("GET "+base+"/partitioned", a.listPartitioned)
	mux.HandleFunc("PUT "+base+"/{topic}", a.createTopic)
	mux.HandleFunc("DELETE "+base+"/{topic}", a.deleteTopic)
	mux.HandleFunc("PUT "+base+"/{topic}/partitions", a.createPartitioned)
	mux.HandleFunc("GET "+base+"/{topic}/partitions", a.getPartitioned)
	mux.HandleFunc("DELETE "+base+"/{topic}/partitions", a.deletePartitioned)
	mux.HandleFunc("GET "+base+"/{topic}/subscriptions", a.listSubscriptions)
	a.registerMore(mux, base)                                                                              // admin_namespaces.go
	mux.HandleFunc("GET /admin/v3/transactions/transactionMetadata/{most}/{least}", a.transactionMetadata) // txn.go
	mux.HandleFunc("POST "+base+"/{topic}/terminate", a.terminateTopic)
	mux.HandleFunc("POST "+base+"/{topic}/partitions/terminate", a.terminatePartitioned)
	a.registerPeek(mux, base) // admin_peek.go
	for _, p := range []string{
		"PUT " + base + "/{topic}/compaction", "POST " + base + "/{topic}/deduplicationEnabled",
		"POST " + base + "/{topic}/replication", "POST /admin/v2/namespaces/{tenant}/{namespace}/deduplication",
		"POST /admin/v2/namespaces/{tenant}/{namespace}/replication",
	} {
		mux.HandleFunc(p, a.notImplemented)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeReason(w, http.StatusNotFound, "pulsartest: this admin endpoint is not part of the subset")
	})
	a.srv = &http.Server{Handler: a.httpAuth(mux), ReadHeaderTimeout: 10 * time.Second}
	b.admin = a
	if ln == nil {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = a.srv.Serve(ln)
	}()
}

func writeReason(w http.ResponseWriter, code int, reason string) {
	writeJSON(w, code, map[string]string{"reason": reason})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return // the client went away; nothing else to tell it
	}
}

func topicOf(r *http.Request) string {
	return "persistent://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic")
}

// topicNotFound is Pulsar 4.0's 404 reason for a topic that does not exist.
func topicNotFound(fq string) string { return "Topic " + fq + " not found" }

// writeErr answers err with Pulsar 4.0's status and, for the topics' own errors, its reason: "This topic
// already exists", "Topic … not found" (fq names the topic).
func writeErr(w http.ResponseWriter, err error) { writeTopicErr(w, "", err) }

func writeTopicErr(w http.ResponseWriter, fq string, err error) {
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
	case errors.Is(err, ErrTopicExists):
		writeReason(w, http.StatusConflict, "This topic already exists")
	case errors.Is(err, ErrTopicNotFound) && fq != "":
		writeReason(w, http.StatusNotFound, topicNotFound(fq))
	case errors.Is(err, ErrTopicNotFound):
		writeReason(w, http.StatusNotFound, err.Error())
	case errors.Is(err, ErrTopicBusy):
		writeReason(w, http.StatusPreconditionFailed, err.Error())
	default:
		writeReason(w, http.StatusBadRequest, err.Error())
	}
}

func (a *adminServer) listTopics(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, nonNil(a.b.topicsOfNamespace(r.PathValue("tenant")+"/"+r.PathValue("namespace"))))
}

func (a *adminServer) listPartitioned(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("tenant") + "/" + r.PathValue("namespace")
	a.b.mu.Lock()
	var out []string
	for name := range a.b.partitioned {
		if namespaceOf(name) == ns {
			out = append(out, name)
		}
	}
	a.b.mu.Unlock()
	writeJSON(w, http.StatusOK, nonNil(out))
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (a *adminServer) createTopic(w http.ResponseWriter, r *http.Request) {
	writeErr(w, a.b.CreateTopic(topicOf(r)))
}

// deleteTopic answers a refusal for connected clients with Pulsar 4.0's 412 reason, which counts them.
func (a *adminServer) deleteTopic(w http.ResponseWriter, r *http.Request) {
	err := a.b.DeleteTopic(topicOf(r))
	if be := (*busyError)(nil); errors.As(err, &be) {
		writeReason(w, http.StatusPreconditionFailed, fmt.Sprintf("Topic has %d connected producers/consumers", be.usage))
		return
	}
	writeTopicErr(w, topicOf(r), err)
}

// createPartitioned creates a partitioned topic, refusing as Pulsar 4.0 does a name that holds "-partition-" (412)
// and a count below 1 (406).
func (a *adminServer) createPartitioned(w http.ResponseWriter, r *http.Request) {
	n, err := partitionsBody(r) // a bare number or pulsaradmin's {"partitions":N,"properties":…}
	switch {
	case err != nil:
		writeReason(w, http.StatusBadRequest, err.Error())
	case strings.Contains(r.PathValue("topic"), partitionSuffix):
		writeReason(w, http.StatusPreconditionFailed, "Partitioned Topic Name should not contain '-partition-'")
	case n < 1:
		writeReason(w, http.StatusNotAcceptable, "Number of partitions should be more than 0")
	default:
		writeErr(w, a.b.CreatePartitionedTopic(topicOf(r), n))
	}
}

// getPartitioned answers the partitioned-topic metadata as Pulsar 4.0 does: {"partitions":N,"deleted":false}, N 0
// for a non-partitioned topic, and 404 for a topic that does not exist, unless the query says
// checkAllowAutoCreation=true (the topic could be created on use; nothing is created).
func (a *adminServer) getPartitioned(w http.ResponseWriter, r *http.Request) {
	fq, err := normalizeTopic(topicOf(r))
	if err != nil {
		writeErr(w, err)
		return
	}
	n := a.b.partitions(fq)
	if n == 0 && len(a.b.topicsFor(fq)) == 0 && r.URL.Query().Get("checkAllowAutoCreation") != "true" {
		writeReason(w, http.StatusNotFound, "Topic "+fq+" not found")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"partitions": n, "deleted": false})
}

func (a *adminServer) deletePartitioned(w http.ResponseWriter, r *http.Request) {
	fq, err := normalizeTopic(topicOf(r))
	if err == nil && a.b.partitions(fq) == 0 {
		writeReason(w, http.StatusNotFound, topicNotFound(fq)+".") // sic: Pulsar 4.0 ends this one with a period
		return
	}
	if err == nil {
		err = a.b.DeleteTopic(fq)
	}
	if errors.Is(err, ErrTopicBusy) {
		writeReason(w, http.StatusPreconditionFailed, "Topic has active producers/subscriptions") // Pulsar 4.0's
		return
	}
	writeErr(w, err)
}

func (a *adminServer) listSubscriptions(w http.ResponseWriter, r *http.Request) {
	fq := topicOf(r)
	if a.b.partitions(fq) == 0 && len(a.b.topicsFor(fq)) == 0 {
		writeReason(w, http.StatusNotFound, topicNotFound(fq))
		return
	}
	writeJSON(w, http.StatusOK, nonNil(a.b.Subscriptions(fq)))
}

func (*adminServer) notImplemented(w http.ResponseWriter, r *http.Request) {
	writeReason(w, http.StatusNotImplemented, "pulsartest: "+r.URL.Path+" (compaction, deduplication, "+
		"replication) is not supported")
}
