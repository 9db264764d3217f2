package main

// The switches over HTTP on loopback, for tests in another process:
//
//	GET    /healthz                    "ok"
//	GET    /projects/<p>/stats         {"project", "faults", "subscriptions": {<id>: counters}, "refused"}
//	POST   /projects/<p>/faults        {"drop_acks": true, ...}: the fields given change; answers stats
//	POST   /projects/<p>/redeliver     every lease expires now (?subscription=<id>: one's); {"expired": n}
//	POST   /projects/<p>/reset         switches off, counters zero; answers stats
//	DELETE /projects/<p>               reset, and delete the project's subscriptions and topics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
)

func controlHandler(f *faults) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /projects/{project}/stats", func(w http.ResponseWriter, r *http.Request) {
		answer(w, http.StatusOK, f.stats(r.PathValue("project")))
	})
	mux.HandleFunc("POST /projects/{project}/faults", func(w http.ResponseWriter, r *http.Request) {
		var patch Patch
		decoder := json.NewDecoder(r.Body)
		decoder.DisallowUnknownFields()
		if err := decoder.Decode(&patch); err != nil {
			answer(w, http.StatusBadRequest, map[string]string{"error": fmt.Sprintf("faults: %v", err)})
			return
		}
		if err := f.set(r.PathValue("project"), patch); err != nil {
			answer(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		answer(w, http.StatusOK, f.stats(r.PathValue("project")))
	})
	mux.HandleFunc("POST /projects/{project}/redeliver", func(w http.ResponseWriter, r *http.Request) {
		expired, err := f.expire(r.Context(), r.PathValue("project"), r.URL.Query().Get("subscription"))
		if err != nil {
			answer(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		answer(w, http.StatusOK, map[string]int{"expired": expired})
	})
	mux.HandleFunc("POST /projects/{project}/reset", func(w http.ResponseWriter, r *http.Request) {
		f.reset(r.PathValue("project"))
		answer(w, http.StatusOK, f.stats(r.PathValue("project")))
	})
	mux.HandleFunc("DELETE /projects/{project}", func(w http.ResponseWriter, r *http.Request) {
		topics, subscriptions, err := f.forget(r.Context(), r.PathValue("project"))
		if err != nil {
			answer(w, http.StatusInternalServerError, map[string]string{"error": err.Error()})
			return
		}
		answer(w, http.StatusOK, map[string]any{
			"forgot": r.PathValue("project"), "topics": topics, "subscriptions": subscriptions,
		})
	})
	return mux
}

func answer(w http.ResponseWriter, code int, body any) {
	var buffer bytes.Buffer
	if err := json.NewEncoder(&buffer).Encode(body); err != nil {
		code, buffer = http.StatusInternalServerError, *bytes.NewBufferString(`{"error":"encoding"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(buffer.Bytes())
}
