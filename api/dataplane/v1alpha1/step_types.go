package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// StepReport is one step Job's report of itself in its member's status.steps: each entry is
// written only by its step, server-side applied under the field manager fedbr-br-<name> (its
// result under fedbr-br-<name>.result), and read by the agent (conditions) and the manager. Fields a step does not report stay empty.
//
// Every list and string is bounded (a member's status.steps at most 4096 entries: a restore's
// warm-ups are one per TiKV): whoever forged a report could otherwise pad the members the
// manager and the agents cache. Backup and Result are schemaless; the API server's request
// limit (1.5 MiB by default) bounds them, and their readers bound and validate them.
type StepReport struct {
	// Name is the step: pause, snapshot, clean, size, lift (backup members); restore-volumes,
	// restore-data, warmup-<ordinal> (restore members).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// Phase is the step's phase (Starting, GCPaused, Ready, Stopping, Stopped, Checking,
	// Started, Waiting, Completed, Reading, Lifting, Lifted, …; Failed when it failed).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Phase string `json:"phase,omitempty"`
	// Error says why the step failed: at most MaxStepError bytes (a step cuts a longer one).
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Error string `json:"error,omitempty"`
	// BackupTS is the pause's (and the snapshot's) backup ts.
	// +optional
	BackupTS uint64 `json:"backupTS,omitempty"`
	// ResolvedTS is the ts a restore step restores to (restore-volumes, restore-data).
	// +optional
	ResolvedTS uint64 `json:"resolvedTS,omitempty"`
	// Attempt and Regions are restore-data's attempt (its planning stages are retried as a
	// whole) and the number of regions it recovers.
	// +optional
	Attempt int32 `json:"attempt,omitempty"`
	// +optional
	Regions int32 `json:"regions,omitempty"`
	// Stores is the number of TiKV stores the pause holds.
	// +optional
	Stores int32 `json:"stores,omitempty"`
	// Since is when the phase began; GCPausedAt when the pause pinned the GC safepoint;
	// LiftedAt when it lifted everything it held (the lift step: when PD showed nothing of the
	// pause's identity held any more).
	// +optional
	Since *metav1.MicroTime `json:"since,omitempty"`
	// +optional
	GCPausedAt *metav1.MicroTime `json:"gcPausedAt,omitempty"`
	// +optional
	LiftedAt *metav1.MicroTime `json:"liftedAt,omitempty"`
	// ReadyAt is when the pause became ready (held everything).
	// +optional
	ReadyAt *metav1.MicroTime `json:"readyAt,omitempty"`
	// BackupTSAt is when an armed snapshot step received the backup ts, StartedAt when every
	// snapshot had started (the pause may be lifted), CompletedAt when every snapshot had
	// completed.
	// +optional
	BackupTSAt *metav1.MicroTime `json:"backupTSAt,omitempty"`
	// +optional
	StartedAt *metav1.MicroTime `json:"startedAt,omitempty"`
	// +optional
	CompletedAt *metav1.MicroTime `json:"completedAt,omitempty"`
	// SlowestStartSeconds is the snapshot step's slowest CreateSnapshots call.
	// +optional
	SlowestStartSeconds float64 `json:"slowestStartSeconds,omitempty"`
	// Sized and SizedBytes are a failed snapshot step's measure of what it had snapshotted,
	// taken just before it deleted its snapshots: how many completed snapshots it sized and
	// their full size in bytes (pending or failed snapshots are not sized).
	// +optional
	Sized int32 `json:"sized,omitempty"`
	// +optional
	SizedBytes int64 `json:"sizedBytes,omitempty"`
	// Settled, in a failed snapshot step's report, says no snapshot of the step can appear in
	// AWS later: it sent no CreateSnapshots call, or every call it sent was answered and it
	// deleted every snapshot they started. The clean of the backup then waits for none.
	// +optional
	Settled bool `json:"settled,omitempty"`
	// Done, Total and Percent are a long step's progress (snapshots started or completed,
	// bytes read).
	// +optional
	Done int64 `json:"done,omitempty"`
	// +optional
	Total int64 `json:"total,omitempty"`
	// +optional
	Percent float64 `json:"percent,omitempty"`
	// ProgressAt is when the step's progress last moved (Done or Percent grew), or when the
	// phase that reports progress began: the agent fails a step whose progress has not moved
	// for stallTimeout.
	// +optional
	ProgressAt *metav1.MicroTime `json:"progressAt,omitempty"`
	// Deleted is clean's count of snapshots deleted (of Total).
	// +optional
	Deleted int32 `json:"deleted,omitempty"`
	// Volumes is restore-volumes' count of the volumes it creates.
	// +optional
	Volumes int32 `json:"volumes,omitempty"`
	// ServiceSafePoint, PausedSchedulers and ScheduleConfig are the pause's identity: what it
	// places in PD (the id of its GC service safepoint, the schedulers it pauses with a delay,
	// the schedule config items it sets with a TTL), reported before it places any of it, so
	// that `fedbr br lift` can undo exactly that when the pause died without lifting it. The
	// lift step reports the identity it lifts in its own entry.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ServiceSafePoint string `json:"serviceSafePoint,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	PausedSchedulers []string `json:"pausedSchedulers,omitempty"`
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	ScheduleConfig []ScheduleConfigItem `json:"scheduleConfig,omitempty"`
	// Backup is restore-volumes' report of the backup it restores, once it read and validated
	// the backupmeta and before it creates any volume: the part of the record the agent checks
	// the target against and rebuilds the TiKV claims from (the TiKV stores and volumes, the
	// resolved ts, each volume's PV and PVC stripped to what a rebuild uses). The agent bounds
	// and validates it as untrusted input.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Backup *runtime.RawExtension `json:"backup,omitempty"`
	// Result is the step's final summary (the JSON it prints), written before it exits 0.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Result *runtime.RawExtension `json:"result,omitempty"`
}

// ScheduleConfigItem is one PD schedule config item a pause sets with a TTL. The values are
// JSON-encoded (4, true, "true"), as PD's config API takes and returns them.
type ScheduleConfigItem struct {
	// Key is the item as PD's config API takes it: schedule.<name>.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Key string `json:"key"`
	// Original is the item's value before the pause; lifting restores it.
	// +kubebuilder:validation:MaxLength=1024
	Original string `json:"original"`
	// Paused is the value the pause sets: while PD shows it (and it differs from Original), the
	// item is held.
	// +kubebuilder:validation:MaxLength=1024
	Paused string `json:"paused"`
}

// HasPauseIdentity says a pause report records what the pause places in PD, so a lift can
// undo it.
func HasPauseIdentity(s StepReport) bool {
	return s.ServiceSafePoint != "" || len(s.PausedSchedulers) > 0 || len(s.ScheduleConfig) > 0
}

// The steps' names in status.steps (a warm-up's is StepWarmup-<ordinal>).
const (
	StepPause          = "pause"
	StepSnapshot       = "snapshot"
	StepClean          = "clean"
	StepSize           = "size"
	StepRestoreVolumes = "restore-volumes"
	StepRestoreData    = "restore-data"
	StepWarmup         = "warmup"
	// StepVerify checks the restored cluster from PD (fedbr br verify), on the data member of
	// a restore whose template asks for verify.
	StepVerify = "verify"
	// StepCheck is the user's check of a restored cluster (the restore template's check),
	// after verify passed. It reports nothing: its exit code is its outcome.
	StepCheck = "check"
	// StepTidbCluster reads the TidbCluster a backup saved (its backupmeta's
	// kubernetes.crd_tidb_cluster) for a scratch restore, whose agent creates it from the
	// step's result (fedbr br tidbcluster).
	StepTidbCluster = "tidbcluster"
	// StepLift undoes what a pause that died placed in PD (fedbr br lift).
	StepLift = "lift"
)

// The pause's phases after it took hold: Ready (holding), then Stopping and Stopped (lifting).
const (
	PausePhaseReady    = "Ready"
	PausePhaseStopping = "Stopping"
	PausePhaseStopped  = "Stopped"
)

// PauseHeld returns the backup ts a pause report says it holds (or held, once lifted): phase
// Ready or later, with its ts; 0 when it never took hold.
func PauseHeld(s StepReport) uint64 {
	switch s.Phase {
	case PausePhaseReady, PausePhaseStopping, PausePhaseStopped:
		return s.BackupTS
	}
	return 0
}

// MaxStepError is the longest StepReport.Error the API takes, in bytes.
const MaxStepError = 8192

// StepPhaseFailed is the phase of a step that failed.
const StepPhaseFailed = "Failed"

// SnapshotArmed says a snapshot report comes from a step that runs and has not failed: armed
// (waiting for the backup ts) or further, so no pod start is left before it can snapshot.
func SnapshotArmed(s StepReport) bool { return s.Name == StepSnapshot && s.Phase != StepPhaseFailed }

// SnapshotsStarted says a snapshot report has every snapshot started: the pause may be lifted.
func SnapshotsStarted(s StepReport) bool { return s.StartedAt != nil }

// SnapshotsCompleted says a snapshot report has every snapshot completed and the step's result
// (backupmeta final): its ts is the report's backup ts.
func SnapshotsCompleted(s StepReport) bool {
	return s.CompletedAt != nil && s.Result != nil && s.BackupTS > 0
}

// Step returns the report of the step named name, if there is one.
func Step(steps []StepReport, name string) (StepReport, bool) {
	for _, s := range steps {
		if s.Name == name {
			return s, true
		}
	}
	return StepReport{}, false
}
