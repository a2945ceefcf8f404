package snapshot

import (
	"testing"

	"github.com/fedbr/fedbr/internal/lab/regiononly"
)

// BenchmarkClusterCheck1MRegions runs the snapshot step's cluster check (every store's pending
// admin operations, PD's regions tiling the key space) over a region-only cluster of a million
// regions and a hundred stores. It reports wall-s and the CPU time and heap (regiononly.Meter).
func BenchmarkClusterCheck1MRegions(b *testing.B) {
	s, _ := startOn(b, regiononly.StartBenchEnv(b))
	h := regiononly.StartMeter()
	for b.Loop() {
		if err := s.checkClusterStill(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
	h.Stop()
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "wall-s")
	h.Report(b, b.N)
}
