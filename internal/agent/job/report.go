package job

import (
	"encoding/json"
	"fmt"
	"strconv"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/report"
)

// Phases the steps report.
const (
	PhaseStarting   = report.PhaseStarting
	PhaseGCPaused   = report.PhaseGCPaused
	PhaseReady      = report.PhaseReady
	PhaseStopping   = report.PhaseStopping
	PhaseStopped    = report.PhaseStopped
	PhaseFailed     = report.PhaseFailed
	PhaseChecking   = report.PhaseChecking
	PhaseStarted    = report.PhaseStarted
	PhaseWaiting    = report.PhaseWaiting
	PhaseCompleted  = report.PhaseCompleted
	PhaseCleaningUp = report.PhaseCleaningUp
	PhaseLifting    = report.PhaseLifting
	PhaseLifted     = report.PhaseLifted
)

// Report is what a member's steps reported of themselves (its status.steps): each step's
// status and final summary.
type Report struct {
	// Steps by step name (pause, snapshot, …, warmup-<ordinal>); Results holds the final
	// summaries.
	Steps   map[string]dpv1alpha1.StepReport
	Results map[string]json.RawMessage
}

// Step returns the report of step, and whether it was reported.
func (r Report) Step(step string) (dpv1alpha1.StepReport, bool) {
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
	r := Report{Steps: map[string]dpv1alpha1.StepReport{}, Results: map[string]json.RawMessage{}}
	for _, s := range steps {
		r.Steps[s.Name] = s
		if s.Result != nil && len(s.Result.Raw) > 0 {
			r.Results[s.Name] = json.RawMessage(s.Result.Raw)
		}
	}
	return r
}

// WarmupKey is the name of the warm-up Job of TiKV member ordinal in status.steps.
func WarmupKey(ordinal int) string { return StepWarmup + "-" + strconv.Itoa(ordinal) }
