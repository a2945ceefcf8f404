// Package metrics holds the manager's Prometheus metrics, registered with controller-runtime's
// registry so they are served on the manager's metrics endpoint next to the controller metrics.
//
// Counters of outcomes are created at 0 for every outcome, so that a rate or an alert on
// failures works before the first failure. The GC pause window — how long the live cluster's GC
// and PD scheduling were held for a backup — is the number SREs watch most: it has its own
// histogram.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Outcomes of a finished operation.
const (
	OutcomeComplete = "complete"
	OutcomeFailed   = "failed"
)

var (
	// BackupsFinished counts VolumeBackups that reached a terminal phase, by outcome.
	BackupsFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fedbr_volumebackup_finished_total",
		Help: "VolumeBackups that completed or failed.",
	}, []string{"outcome"})
	// BackupDuration is the time from start to completion or failure.
	BackupDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fedbr_volumebackup_duration_seconds",
		Help:    "Time from a VolumeBackup's start to its completion or failure.",
		Buckets: prometheus.ExponentialBuckets(5, 2, 14), // 5 s … ~11 h
	}, []string{"outcome"})
	// GCPause is the GC/PD pause window of each backup.
	GCPause = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fedbr_volumebackup_gc_pause_seconds",
		Help:    "How long GC and PD scheduling were paused for a backup (pause ready to lifted).",
		Buckets: []float64{0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60, 120, 300, 600},
	})
	// BackupSize is the full size of the last completed backup of each VolumeBackup.
	BackupSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackup_size_bytes",
		Help: "Full size of a completed VolumeBackup (sum over members).",
	}, []string{"namespace", "name"})
	// BackupIncrementalSize is what each completed VolumeBackup added over the previous snapshots.
	BackupIncrementalSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackup_incremental_size_bytes",
		Help: "Incremental size of a completed VolumeBackup: blocks changed since the previous snapshots (sum over members).",
	}, []string{"namespace", "name"})
	// RestoresFinished counts VolumeRestores that reached a terminal phase, by outcome.
	RestoresFinished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fedbr_volumerestore_finished_total",
		Help: "VolumeRestores that completed or failed.",
	}, []string{"outcome"})
	// RestoreDuration is the time from start to completion or failure.
	RestoreDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fedbr_volumerestore_duration_seconds",
		Help:    "Time from a VolumeRestore's start to its completion or failure.",
		Buckets: prometheus.ExponentialBuckets(5, 2, 14),
	}, []string{"outcome"})
	// RestoreStepDuration is each restore step's time, from its start to its completion: the
	// restore's time to recovery, split (RestoreVolume, StartTiKV, WarmUp, RestoreData,
	// RestartTiKV).
	RestoreStepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fedbr_volumerestore_step_duration_seconds",
		Help:    "Time from a VolumeRestore step's start to its completion, by step: the restore's time to recovery, split.",
		Buckets: prometheus.ExponentialBuckets(1, 2, 14),
	}, []string{"step"})
	// ScheduleWindowStart is the start of each schedule's latest closed window (its second-latest
	// tick): a backup should have completed since. Absent while paused or before two ticks.
	ScheduleWindowStart = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackupschedule_window_start_timestamp_seconds",
		Help: "The schedule's second-latest tick (Unix seconds): a backup completed since then, or the schedule missed a window. Absent while paused.",
	}, []string{"namespace", "schedule"})
	// ScheduleLastSuccess is when each schedule's newest complete backup completed.
	ScheduleLastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackupschedule_last_success_timestamp_seconds",
		Help: "When the schedule's newest complete VolumeBackup completed (Unix seconds).",
	}, []string{"namespace", "schedule"})
	// ScheduleLastDuration is how long that backup took.
	ScheduleLastDuration = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackupschedule_last_duration_seconds",
		Help: "Start to completion of the schedule's newest complete VolumeBackup.",
	}, []string{"namespace", "schedule"})
	// ScheduleLastSize is the full size of the newest complete backup whose size is known.
	ScheduleLastSize = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackupschedule_last_size_bytes",
		Help: "Full size of the schedule's newest complete and sized VolumeBackup (sum over members).",
	}, []string{"namespace", "schedule"})
	// GCPausedSince is when a running backup's pause began to hold GC and PD scheduling, while
	// it holds (the series goes when it is lifted): time() minus it is how long the live cluster
	// has been held so far, which an alert bounds. One series per backup holding a pause, so
	// never more than the TiDB clusters backed up at once.
	GCPausedSince = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackup_gc_paused_since_timestamp_seconds",
		Help: "When the VolumeBackup's pause began holding GC and PD scheduling (Unix seconds); present only while it holds.",
	}, []string{"namespace", "name"})
	// BackupCleanFailedSince is when a deleted backup's clean began to fail (its Cleaned
	// condition False, CleanFailed), while it fails: the backup keeps its finalizer and what its
	// clean has not deleted (snapshots, metadata) stays. The series goes with the backup.
	BackupCleanFailedSince = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackup_clean_failed_since_timestamp_seconds",
		Help: "When the deleted VolumeBackup's clean began to fail (Unix seconds); present only while it fails.",
	}, []string{"namespace", "name"})
	// ScheduleRetentionBlocked is 1 while a schedule's retention waits on a backup whose clean
	// fails (its Retention condition False, CleanFailed): no older backup is deleted meanwhile.
	ScheduleRetentionBlocked = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackupschedule_retention_blocked",
		Help: "1 while the schedule's retention is held by a backup whose clean fails; absent otherwise.",
	}, []string{"namespace", "schedule"})
	// ScheduleLastVerified is when the newest passing verdict on one of a schedule's backups was
	// judged: a restore with verify restored it and its checks passed (the backup's Verified).
	ScheduleLastVerified = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackupschedule_last_verified_timestamp_seconds",
		Help: "When a restore last proved one of the schedule's VolumeBackups restores (its Verified True; Unix seconds); absent until one did.",
	}, []string{"namespace", "schedule"})
	// ScheduleLastRecovery is the recovery time that restore measured.
	ScheduleLastRecovery = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackupschedule_last_recovery_seconds",
		Help: "Start to checks judged of the restore behind the schedule's newest passing verification: the recovery time measured.",
	}, []string{"namespace", "schedule"})
	// ScheduleLastVerificationFailed is 1 when the newest verdict on a schedule's backups failed.
	ScheduleLastVerificationFailed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackupschedule_last_verification_failed",
		Help: "1 when the newest verdict on the schedule's VolumeBackups is Verified False (a check failed or the restore failed), 0 when it passed; absent until one is judged.",
	}, []string{"namespace", "schedule"})
	// ScheduleDrillFailed is 1 while a schedule's latest drill gave no verdict (timed out, or its
	// backup too large to drill): its Drill condition is False.
	ScheduleDrillFailed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_volumebackupschedule_drill_failed",
		Help: "1 while the schedule's latest drill (spec.verify) gave no verdict: it timed out, or its backup was too large to drill (condition Drill False, reason as the label); absent otherwise.",
	}, []string{"namespace", "schedule", "reason"})
	// PlaneReachable is 1 while a data plane's API server answers and its cache is synced.
	PlaneReachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_dataplane_reachable",
		Help: "1 while the data plane is reachable from the manager.",
	}, []string{"plane"})
	// PlaneAgentUp is 1 while a data plane's agent holds and renews its leader-election Lease.
	PlaneAgentUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_dataplane_agent_up",
		Help: "1 while the data plane's agent holds and renews its Lease (fedbr-agent-<plane> in the agent namespace), as the manager last read it; 0 when no agent does, or the Lease cannot be read.",
	}, []string{"plane"})
	// PlaneTokenExpiry is when a data plane's kubeconfig token expires (its exp claim), for the
	// planes whose context has a static token that says (a bound service-account token).
	PlaneTokenExpiry = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "fedbr_dataplane_token_expiry_timestamp_seconds",
		Help: "When the data plane's kubeconfig token expires (Unix seconds); absent for credentials without an expiry the manager can read.",
	}, []string{"plane"})
)

// All are the manager's metrics.
func All() []prometheus.Collector {
	return []prometheus.Collector{BackupsFinished, BackupDuration, GCPause, BackupSize, BackupIncrementalSize,
		RestoresFinished, RestoreDuration, RestoreStepDuration, PlaneReachable, PlaneAgentUp, PlaneTokenExpiry, ScheduleWindowStart, ScheduleLastSuccess, ScheduleLastDuration, ScheduleLastSize, GCPausedSince,
		BackupCleanFailedSince, ScheduleRetentionBlocked, ScheduleLastVerified, ScheduleLastRecovery, ScheduleLastVerificationFailed, ScheduleDrillFailed}
}

func init() {
	crmetrics.Registry.MustRegister(All()...)
	for _, o := range []string{OutcomeComplete, OutcomeFailed} {
		BackupsFinished.WithLabelValues(o)
		RestoresFinished.WithLabelValues(o)
	}
}
