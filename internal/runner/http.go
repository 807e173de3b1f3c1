package runner

import (
	"fmt"
	"net/http"
	"time"
)

// Handler serves the sidecar's port: /healthz (the process is alive),
// /readyz (the last snapshot succeeded, recently), POST /snapshot (take
// one now) and, when metrics is set, /metrics.
func Handler(r *Runner, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		s := r.Status()
		if !s.Ready {
			http.Error(w, "not ready: "+s.Reason, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "ready: last snapshot succeeded at %s\n", s.LastSuccess.UTC().Format(time.RFC3339))
	})
	mux.HandleFunc("POST /snapshot", func(w http.ResponseWriter, _ *http.Request) {
		r.Trigger()
		w.WriteHeader(http.StatusAccepted)
		fmt.Fprintln(w, "snapshot requested")
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	return mux
}
