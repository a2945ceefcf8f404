package describe

import (
	"fmt"
	"time"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/report"
)

// Observation is the percent a step reported, as read at At.
type Observation struct {
	At      time.Time
	Percent float64
}

// Estimate is the time left of a step whose progress was read as obs (oldest first), at the
// rate between the oldest and the newest observation: "estimating" until two observations
// exist, or while the percent has not moved between them (it says for how long), "" when the
// newest is at 100 %, else "about <d> left".
func Estimate(obs []Observation) string {
	if len(obs) < 2 {
		return "estimating"
	}
	first, last := obs[0], obs[len(obs)-1]
	if last.Percent >= 100 {
		return ""
	}
	span := last.At.Sub(first.At)
	gained := last.Percent - first.Percent
	switch {
	case span <= 0:
		return "estimating"
	case gained <= 0:
		return "estimating: no progress in " + round(span).String()
	}
	left := time.Duration(float64(span) * (100 - last.Percent) / gained)
	return "about " + round(left).String() + " left"
}

// Observer remembers each snapshot step's percent across the views of one `describe --watch`,
// for Estimate. A step's observations start again when its phase or the time its phase began
// changes (a new phase, a retried Job) or its percent goes back; only those of the last window
// are kept, so the rate is the recent one.
type Observer struct {
	// Window bounds the age of the observations kept (default 10 minutes).
	Window time.Duration
	tracks map[string]*track
}

type track struct {
	phase string
	since time.Time
	obs   []Observation
}

// estimated says whether a step's line estimates from observations: the snapshot step, which
// reports the average percent of its EBS snapshots.
func estimated(s dpv1alpha1.StepReport) bool { return s.Name == dpv1alpha1.StepSnapshot }

// Observe records, read at at, the percent of every step of v that Estimate serves and sets
// each member's Observed to that step's observations so far.
func (o *Observer) Observe(v *View, at time.Time) {
	if o.tracks == nil {
		o.tracks = map[string]*track{}
	}
	window := o.Window
	if window <= 0 {
		window = 10 * time.Minute
	}
	for i := range v.Members {
		m := &v.Members[i]
		for _, s := range m.Steps {
			if !estimated(s) {
				continue
			}
			key := m.Plane + "/" + m.Namespace + "/" + m.Name + "/" + s.Name
			var since time.Time
			if s.Since != nil {
				since = s.Since.Time
			}
			t := o.tracks[key]
			if t == nil || t.phase != s.Phase || !t.since.Equal(since) ||
				len(t.obs) > 0 && s.Percent < t.obs[len(t.obs)-1].Percent {
				t = &track{phase: s.Phase, since: since}
				o.tracks[key] = t
			}
			t.obs = append(t.obs, Observation{At: at, Percent: s.Percent})
			for len(t.obs) > 2 && at.Sub(t.obs[0].At) > window {
				t.obs = t.obs[1:]
			}
			if m.Observed == nil {
				m.Observed = map[string][]Observation{}
			}
			m.Observed[s.Name] = append([]Observation(nil), t.obs...)
		}
	}
}

// snapshotProgress is the snapshot step's line: snapshots completed of all, the percent the
// step reports (the average progress of its snapshots), and while it waits for them the
// estimate of the time left from obs.
func snapshotProgress(s dpv1alpha1.StepReport, obs []Observation) string {
	if s.Total <= 0 {
		return ""
	}
	out := fmt.Sprintf("%d/%d snapshots completed, %.1f%%", s.Done, s.Total, s.Percent)
	// Waiting is the snapshot step's phase while its snapshots progress (package
	// internal/br/snapshot); before it no percent is reported, after it there is nothing left.
	if s.Phase != report.PhaseWaiting {
		return out
	}
	if e := Estimate(obs); e != "" {
		out += ", " + e
	}
	return out
}
