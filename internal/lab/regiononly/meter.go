package regiononly

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"time"
)

// heapObjects is the runtime metric of the bytes held by heap objects, live or not yet swept:
// what the heap needs at that moment. Reading it does not stop the world.
const heapObjects = "/memory/classes/heap/objects:bytes"

// Meter measures a region-only benchmark: the process's CPU time, and the heap sampled every
// few milliseconds, keeping the high-water mark of each phase above the heap at StartMeter
// (after a collection): the cluster's doubles and
// the clients at rest are in that base, what the step holds and the garbage between two
// collections are in the peak (the garbage of the doubles' answers included, as the benchmark
// runs them in the same process).
type Meter struct {
	base uint64
	cpu  time.Duration // at the start, then (Stop) the time used since

	mu    sync.Mutex
	peak  uint64 // over every phase
	phase string
	peaks map[string]uint64
	order []string

	stop chan struct{}
	done chan struct{}
}

// StartMeter collects garbage, takes the base and samples until Stop.
func StartMeter() *Meter {
	runtime.GC()
	h := &Meter{base: readHeap(), cpu: cpuTime(), peaks: map[string]uint64{}, stop: make(chan struct{}), done: make(chan struct{})}
	go h.loop()
	return h
}

func readHeap() uint64 {
	s := []metrics.Sample{{Name: heapObjects}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func (h *Meter) loop() {
	defer close(h.done)
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		h.sample()
		select {
		case <-h.stop:
			return
		case <-t.C:
		}
	}
}

func (h *Meter) sample() {
	v := readHeap()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.peak = max(h.peak, v)
	if h.phase != "" && v > h.peaks[h.phase] {
		h.peaks[h.phase] = v
	}
}

// Phase starts a named phase: samples from now on count towards it ("" counts towards none).
func (h *Meter) Phase(name string) {
	h.sample()
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.peaks[name]; !ok && name != "" {
		h.order = append(h.order, name)
		h.peaks[name] = 0
	}
	h.phase = name
}

// Stop ends the measuring.
func (h *Meter) Stop() {
	h.sample()
	close(h.stop)
	<-h.done
	h.cpu = cpuTime() - h.cpu
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Metrics is where Report reports: a *testing.B.
type Metrics interface {
	ReportMetric(n float64, unit string)
}

// Report reports the CPU time per run ("cpu-s": fedbr's and the doubles', which share the
// process; on a busy machine a steadier measure of the work than the wall time) and, in MiB,
// the heap's base ("base-heap-MiB"), its peak above the base ("peak-heap-MiB") and each named
// phase's peak above the base ("<phase>-peak-heap-MiB"). runs is the number of runs measured.
func (h *Meter) Report(m Metrics, runs int) {
	const mib = 1 << 20
	h.mu.Lock()
	defer h.mu.Unlock()
	above := func(v uint64) float64 { return float64(max(v, h.base)-h.base) / mib }
	m.ReportMetric(h.cpu.Seconds()/float64(max(runs, 1)), "cpu-s")
	m.ReportMetric(float64(h.base)/mib, "base-heap-MiB")
	m.ReportMetric(above(h.peak), "peak-heap-MiB")
	for _, p := range h.order {
		m.ReportMetric(above(h.peaks[p]), p+"-peak-heap-MiB")
	}
}
