package pause

import (
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/regiononly"
)

// BenchmarkPause1MRegions pauses a region-only cluster of a million regions over a hundred
// stores until Ready (every region wait-applied), then lifts it. It reports ready-s (start to
// Ready), wall-s (with the lifting) and the CPU time and heap (regiononly.Meter).
func BenchmarkPause1MRegions(b *testing.B) {
	e := &regionOnlyEnv{regiononly.StartBenchEnv(b)}
	h := regiononly.StartMeter()
	var ready time.Duration
	for b.Loop() {
		start := time.Now()
		readyAt, err := e.pauseUntilReady(b.Context(), nil)
		if err != nil {
			b.Fatal(err)
		}
		if readyAt.IsZero() {
			b.Fatal("the pause ended without reporting Ready")
		}
		ready += readyAt.Sub(start)
	}
	h.Stop()
	if n := e.Cluster.NotWaitApplied(); n != 0 {
		b.Fatalf("%d regions never wait-applied", n)
	}
	b.ReportMetric(ready.Seconds()/float64(b.N), "ready-s")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "wall-s")
	h.Report(b, b.N)
}
