package job

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
)

// Phases the steps report.
const (
	PhaseStarting   = "Starting"
	PhaseGCPaused   = "GCPaused"
	PhaseReady      = "Ready"
	PhaseStopping   = "Stopping"
	PhaseStopped    = "Stopped"
	PhaseFailed     = "Failed"
	PhaseChecking   = "Checking"
	PhaseStarted    = "Started"
	PhaseWaiting    = "Waiting"
	PhaseCompleted  = "Completed"
	PhaseCleaningUp = "CleaningUp"
	PhaseLifting    = "Lifting"
	PhaseLifted     = "Lifted"
)

// StepStatus is what the agent reads of a step's report (dpv1alpha1.StepReport). Fields a step
// does not report stay zero.
type StepStatus struct {
	Phase string `json:"phase"`
	Error string `json:"error,omitempty"`
	// BackupTS is the pause's (and the snapshot's) backup ts.
	BackupTS uint64 `json:"backupTS,omitempty"`
	// Stores is the number of TiKV stores the pause holds.
	Stores int `json:"stores,omitempty"`
	// Since is when the phase began; GCPausedAt when the GC safepoint was pinned; LiftedAt
	// when everything the pause held was lifted.
	Since      *time.Time `json:"since,omitempty"`
	GCPausedAt *time.Time `json:"gcPausedAt,omitempty"`
	LiftedAt   *time.Time `json:"liftedAt,omitempty"`
	// Done, Total and Percent are the snapshot's (or another long step's) progress.
	Done    int     `json:"done,omitempty"`
	Total   int     `json:"total,omitempty"`
	Percent float64 `json:"percent,omitempty"`
	// Deleted is clean's count of snapshots deleted (of Total).
	Deleted int `json:"deleted,omitempty"`
	// Volumes is restore-volumes' count of volumes it creates.
	Volumes int `json:"volumes,omitempty"`
	// Identity says the pause's report records what it places in PD (its service safepoint,
	// schedulers, config items: dpv1alpha1.HasPauseIdentity), so `fedbr br lift` can undo it;
	// ServiceSafePoint is that safepoint's id.
	Identity         bool   `json:"identity,omitempty"`
	ServiceSafePoint string `json:"serviceSafePoint,omitempty"`
}

// Report is what a member's steps reported of themselves (its status.steps): each step's
// status and final summary.
type Report struct {
	// Steps by step name (pause, snapshot, …, warmup-<ordinal>); Results holds the final
	// summaries.
	Steps   map[string]StepStatus
	Results map[string]json.RawMessage
}

// Step returns the status of step, and whether it was reported.
func (r Report) Step(step string) (StepStatus, bool) {
	s, ok := r.Steps[step]
	return s, ok
}

// Result decodes the final summary of step into v; false when there is none.
func (r Report) Result(step string, v any) (bool, error) {
	raw, ok := r.Results[step]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return true, fmt.Errorf("the %s result in the member's status.steps: %w", step, err)
	}
	return true, nil
}

// ReportOf reads a member's status.steps.
func ReportOf(steps []dpv1alpha1.StepReport) Report {
	r := Report{Steps: map[string]StepStatus{}, Results: map[string]json.RawMessage{}}
	for _, s := range steps {
		r.Steps[s.Name] = StepStatus{Phase: s.Phase, Error: s.Error, BackupTS: s.BackupTS, Stores: int(s.Stores),
			Since: timeOf(s.Since), GCPausedAt: timeOf(s.GCPausedAt), LiftedAt: timeOf(s.LiftedAt),
			Done: int(s.Done), Total: int(s.Total), Percent: s.Percent, Deleted: int(s.Deleted), Volumes: int(s.Volumes),
			Identity: dpv1alpha1.HasPauseIdentity(s), ServiceSafePoint: s.ServiceSafePoint}
		if s.Result != nil && len(s.Result.Raw) > 0 {
			r.Results[s.Name] = json.RawMessage(s.Result.Raw)
		}
	}
	return r
}

func timeOf(t *metav1.MicroTime) *time.Time {
	if t == nil {
		return nil
	}
	v := t.Time
	return &v
}

// WarmupKey is the name of the warm-up Job of TiKV member ordinal in status.steps.
func WarmupKey(ordinal int) string { return StepWarmup + "-" + strconv.Itoa(ordinal) }
