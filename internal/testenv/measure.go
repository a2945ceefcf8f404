package testenv

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// What the scale measurements (the manager's and the agent's TestScale) read of the process
// and of controller-runtime's metrics registry, which the controllers started in the test
// process fill.

// WaitIdle waits until the controllers have reconciled something and then nothing for 5 s with
// empty work queues, and returns when they were last busy.
func WaitIdle(t testing.TB) time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Minute)
	last, lastChange := -1.0, time.Now()
	for time.Now().Before(deadline) {
		total, depth := 0.0, 0.0
		for _, f := range gather(t) {
			switch f.GetName() {
			case "controller_runtime_reconcile_total":
				for _, m := range f.GetMetric() {
					total += m.GetCounter().GetValue()
				}
			case "workqueue_depth":
				for _, m := range f.GetMetric() {
					depth += m.GetGauge().GetValue()
				}
			}
		}
		if total != last || depth > 0 {
			last, lastChange = total, time.Now()
		} else if total > 0 && time.Since(lastChange) > 5*time.Second {
			return lastChange
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("the controllers did not become idle within 10 minutes")
	return time.Time{}
}

func gather(t testing.TB) []*dto.MetricFamily {
	t.Helper()
	fs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// ReconcileTable is a table of every controller's reconciles: their count, the histogram
// bucket bounds their 50th and 99th percentiles fall in, and how many took over 100 ms.
func ReconcileTable(t testing.TB) string {
	t.Helper()
	type row struct {
		controller string
		count      uint64
		p50, p99   string
		over100ms  uint64
	}
	var rows []row
	for _, f := range gather(t) {
		if f.GetName() != "controller_runtime_reconcile_time_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			r := row{}
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" {
					r.controller = l.GetValue()
				}
			}
			h := m.GetHistogram()
			if r.count = h.GetSampleCount(); r.count == 0 {
				continue
			}
			r.p50, r.p99 = "> max", "> max"
			var at100 uint64
			for _, bk := range h.GetBucket() {
				if bk.GetUpperBound() <= 0.1 {
					at100 = bk.GetCumulativeCount()
				}
				if r.p50 == "> max" && float64(bk.GetCumulativeCount()) >= 0.5*float64(r.count) {
					r.p50 = "≤ " + seconds(bk.GetUpperBound())
				}
				if r.p99 == "> max" && float64(bk.GetCumulativeCount()) >= math.Ceil(0.99*float64(r.count)) {
					r.p99 = "≤ " + seconds(bk.GetUpperBound())
				}
			}
			r.over100ms = r.count - at100
			rows = append(rows, r)
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].controller < rows[j].controller })
	var b strings.Builder
	fmt.Fprintf(&b, "  %-22s %10s %10s %10s %12s\n", "controller", "reconciles", "p50", "p99", "over 100 ms")
	for _, r := range rows {
		fmt.Fprintf(&b, "  %-22s %10d %10s %10s %12d\n", r.controller, r.count, r.p50, r.p99, r.over100ms)
	}
	return b.String()
}

func seconds(s float64) string { return (time.Duration(s * float64(time.Second))).String() }

// HeapInUse is the Go heap in use after a collection.
func HeapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// RSS and PeakRSS read the process's resident set now and at its peak (/proc/self/status).
func RSS(t testing.TB) uint64     { return procStatus(t, "VmRSS:") }
func PeakRSS(t testing.TB) uint64 { return procStatus(t, "VmHWM:") }

func procStatus(t testing.TB, field string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", field)
	return 0
}
