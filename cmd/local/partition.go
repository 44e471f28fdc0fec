package main

import (
	"encoding/json"
	"net/http"

	"github.com/example/waitingroom/internal/api"
	"github.com/example/waitingroom/internal/tools/partitionmodel"
)

// partitionStatsPath serves the partition model's counts (-partition-limits).
const partitionStatsPath = "/debug/partition-model"

// withPartitionStats serves m's summary at partitionStatsPath (GET, JSON:
// the totals and the busiest partitions; 404 when m is nil) and everything
// else with next.
func withPartitionStats(next http.Handler, m *partitionmodel.Model) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != partitionStatsPath || r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if m == nil {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]string{"code": api.CodeNotFound, "message": "No partition model: start the server with -partition-limits."})
			return
		}
		_ = json.NewEncoder(w).Encode(m.Summarize())
	})
}
