// Package metrics holds the agent's Prometheus metrics, registered with controller-runtime's
// registry so the manager's metrics endpoint serves them.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics are the agent's metrics. Labels are bounded: kind, step, phase, result — never an
// object's name.
type Metrics struct {
	// JobsCreated counts step Jobs created, by kind and step.
	JobsCreated *prometheus.CounterVec
	// StepDuration observes how long finished steps ran, by kind, step and result.
	StepDuration *prometheus.HistogramVec
	// Members is the number of members in each phase, by kind.
	Members *prometheus.GaugeVec
	// OrphansDeleted counts the snapshots and volumes the orphan sweeper deleted, by kind
	// (snapshot, volume).
	OrphansDeleted *prometheus.CounterVec
	// OrphanSweepErrors counts what failed in the orphan sweeper: a listing that made a sweep
	// give up, a deletion that failed.
	OrphanSweepErrors prometheus.Counter

	mu       sync.Mutex
	seen     map[phaseKey]string
	observed map[string]bool
}

// Kind is a member kind with the phases its planner derives and the steps its Jobs run: their
// series start at zero, so dashboards see every one from the start. The planners own the lists
// (backupmember.MetricsKind, restoremember.MetricsKind).
type Kind struct {
	Name   string
	Phases []string
	Steps  []string
}

// Orphan kinds, the values of OrphansDeleted's label.
const (
	OrphanSnapshot = "snapshot"
	OrphanVolume   = "volume"
)

// OrphanKinds are the orphan kinds, each series initialised to zero.
var OrphanKinds = []string{OrphanSnapshot, OrphanVolume}

// New creates the metrics, every series of kinds at zero; Register adds them to a registry.
func New(kinds ...Kind) *Metrics {
	m := &Metrics{
		JobsCreated: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "fedbr", Subsystem: "agent", Name: "jobs_created_total",
			Help: "Step Jobs the agent created, by member kind and step.",
		}, []string{"kind", "step"}),
		StepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "fedbr", Subsystem: "agent", Name: "step_duration_seconds",
			Help:    "How long finished step Jobs ran, by member kind, step and result.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 16),
		}, []string{"kind", "step", "result"}),
		Members: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "fedbr", Subsystem: "agent", Name: "members",
			Help: "Members this agent reconciles, by kind and the phase it last planned (status.phase once written).",
		}, []string{"kind", "phase"}),
		OrphansDeleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "fedbr", Subsystem: "agent", Name: "orphans_deleted_total",
			Help: "Snapshots and volumes the orphan sweeper deleted because the member they were made for is gone, by kind (snapshot, volume).",
		}, []string{"kind"}),
		OrphanSweepErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "fedbr", Subsystem: "agent", Name: "orphan_sweep_errors_total",
			Help: "Failures of the orphan sweeper: a listing that made a sweep give up, or a deletion that failed.",
		}),
	}
	for _, kind := range OrphanKinds {
		m.OrphansDeleted.WithLabelValues(kind)
	}
	for _, k := range kinds {
		for _, p := range k.Phases {
			m.Members.WithLabelValues(k.Name, p)
		}
		for _, s := range k.Steps {
			m.JobsCreated.WithLabelValues(k.Name, s)
		}
	}
	return m
}

// Register adds the metrics to reg (controller-runtime's registry when nil).
func (m *Metrics) Register(reg prometheus.Registerer) error {
	if reg == nil {
		reg = ctrlmetrics.Registry
	}
	for _, c := range []prometheus.Collector{m.JobsCreated, m.StepDuration, m.Members, m.OrphansDeleted, m.OrphanSweepErrors} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// phaseKey identifies a member in the phase gauge's bookkeeping.
type phaseKey struct{ kind, namespace, name string }

// SetPhase records that a member is now in phase ("" when it is gone), moving it between
// the gauge's series.
func (m *Metrics) SetPhase(kind, namespace, name, phase string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.seen == nil {
		m.seen = map[phaseKey]string{}
	}
	k := phaseKey{kind, namespace, name}
	old, ok := m.seen[k]
	if ok && old == phase {
		return
	}
	if ok {
		m.Members.WithLabelValues(kind, old).Dec()
	}
	if phase == "" {
		delete(m.seen, k)
		return
	}
	m.seen[k] = phase
	m.Members.WithLabelValues(kind, phase).Inc()
}

// maxObservedSteps bounds the set of Jobs whose duration was observed; when it is full it
// starts over (a step observed twice after that only skews one histogram sample).
const maxObservedSteps = 10000

// ObserveStep records a finished step's duration once per key (its Job).
func (m *Metrics) ObserveStep(kind, step, key string, succeeded bool, started, finished time.Time) {
	if started.IsZero() || finished.IsZero() || finished.Before(started) {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.observed == nil || len(m.observed) >= maxObservedSteps {
		m.observed = map[string]bool{}
	}
	if m.observed[key] {
		return
	}
	m.observed[key] = true
	result := "failed"
	if succeeded {
		result = "succeeded"
	}
	m.StepDuration.WithLabelValues(kind, step, result).Observe(finished.Sub(started).Seconds())
}
