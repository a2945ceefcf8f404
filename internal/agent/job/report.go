package job

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StatusConfigMapName is the name of the ConfigMap a member's steps report in. The agent
// creates it (owned by the member) before the first Job and watches it, so a step's progress
// reaches the agent as an event, not by polling.
func StatusConfigMapName(member string) string {
	return shorten(member, 253-len("-status")) + "-status"
}

// ResultKey is the data key of a command's final JSON summary, written before it exits 0.
func ResultKey(step string) string { return step + ".result" }

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
)

// StepStatus is the JSON a step keeps rewriting under its command's key. Fields a command does
// not report stay zero.
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
}

// Report is the parsed status ConfigMap: each step's status and final summary.
type Report struct {
	// Exists says the ConfigMap was observed.
	Exists bool
	// Steps by command; Results holds the raw `<command>.result` summaries.
	Steps   map[string]StepStatus
	Results map[string]json.RawMessage
	// Invalid lists keys whose JSON could not be read (reported, never fatal on their own).
	Invalid map[string]string
	// BackupTS is the backup ts the agent published to an armed snapshot step (key BackupTSKey).
	BackupTS string
	// Release is set once the agent asked the pause to lift everything (key ReleaseKey).
	Release string
	// Start is set once the agent gave an armed step its go (key StartKey).
	Start string
}

// ReleaseKey is the status ConfigMap key on which a pause started with --watch-release lifts
// everything.
const ReleaseKey = "release"

// StartKey is the status ConfigMap key on which a step started with --wait-start (an armed
// pause or restore-data) begins.
const StartKey = "start"

// BackupTSKey is the status ConfigMap key through which the agent hands the backup ts to a
// snapshot step started ahead of the pause (`fedbr br snapshot --wait-backup-ts`).
const BackupTSKey = "backup-ts"

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
		return true, fmt.Errorf("the %s summary in the status ConfigMap: %w", step, err)
	}
	return true, nil
}

// ParseReport reads a status ConfigMap; nil is a report that does not exist yet.
func ParseReport(cm *corev1.ConfigMap) Report {
	r := Report{Steps: map[string]StepStatus{}, Results: map[string]json.RawMessage{}, Invalid: map[string]string{}}
	if cm == nil {
		return r
	}
	r.Exists = true
	r.BackupTS = cm.Data[BackupTSKey]
	r.Release = cm.Data[ReleaseKey]
	r.Start = cm.Data[StartKey]
	steps := []string{StepPause, StepSnapshot, StepClean, StepSize, StepRestoreVolumes, StepRestoreData}
	for k := range cm.Data {
		if strings.HasPrefix(k, StepWarmup+"-") && !strings.HasSuffix(k, ResultKey("")) {
			steps = append(steps, k) // one key per warm-up Job (WarmupKey)
		}
	}
	for _, step := range steps {
		if v, ok := cm.Data[step]; ok {
			var s StepStatus
			if err := json.Unmarshal([]byte(v), &s); err != nil {
				r.Invalid[step] = err.Error()
			} else {
				r.Steps[step] = s
			}
		}
		if v, ok := cm.Data[ResultKey(step)]; ok {
			if !json.Valid([]byte(v)) {
				r.Invalid[ResultKey(step)] = "not JSON"
			} else {
				r.Results[step] = json.RawMessage(v)
			}
		}
	}
	return r
}

// WarmupKey is the status ConfigMap key of the warm-up Job of TiKV member ordinal.
func WarmupKey(ordinal int) string { return StepWarmup + "-" + strconv.Itoa(ordinal) }

// StatusConfigMap is the empty status ConfigMap of a member, owned by it.
func StatusConfigMap(member, namespace string, owner metav1.OwnerReference) *corev1.ConfigMap {
	l := Selector(member)
	l[LabelName] = NameValue
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: StatusConfigMapName(member), Namespace: namespace, Labels: l,
			Annotations:     map[string]string{AnnotationOwner: owner.Kind + "/" + member},
			OwnerReferences: []metav1.OwnerReference{owner}},
	}
}
