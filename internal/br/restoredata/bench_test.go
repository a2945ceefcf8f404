package restoredata

import (
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/regiononly"
)

// BenchmarkRestoreData1MRegions runs the data phase over a region-only cluster of a million
// regions and a hundred stores: region metas read, planned, leaders recovered (recover-s), then
// every region flashed back (flashback-s). It reports wall-s and the CPU time and the heap of each phase
// (regiononly.Meter).
func BenchmarkRestoreData1MRegions(b *testing.B) {
	e := &regionOnlyEnv{regiononly.StartBenchEnv(b)}
	h := regiononly.StartMeter()
	var at = map[string]time.Time{}
	var recoverD, flashbackD time.Duration
	for b.Loop() {
		clear(at)
		start := time.Now()
		res, err := e.run(b.Context(), regiononly.BenchStores, Deps{Report: func(s Status) {
			if _, ok := at[s.Phase]; !ok {
				at[s.Phase] = time.Now()
				switch s.Phase {
				case PhaseRecoveringRegions:
					h.Phase("recover")
				case PhaseFlashingBack:
					h.Phase("flashback")
				}
			}
		}}, Config{})
		if err != nil {
			b.Fatal(err)
		}
		if res.Regions != regiononly.BenchRegions {
			b.Fatalf("planned %d regions, want %d", res.Regions, regiononly.BenchRegions)
		}
		end := time.Now()
		recoverD += at[PhaseFlashingBack].Sub(start)
		flashbackD += end.Sub(at[PhaseFlashingBack])
	}
	h.Stop()
	if n := e.Cluster.NotFlashedBack(); n != 0 {
		b.Fatalf("%d regions not flashed back", n)
	}
	b.ReportMetric(recoverD.Seconds()/float64(b.N), "recover-s")
	b.ReportMetric(flashbackD.Seconds()/float64(b.N), "flashback-s")
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "wall-s")
	h.Report(b, b.N)
}
