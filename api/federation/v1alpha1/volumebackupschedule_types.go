package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Admission patterns shared by the CRD markers below and the Go validation in
// volumebackupschedule_funcs.go; a test keeps the two in step.
const (
	// CronPattern accepts what robfig/cron's standard parser accepts, field by field: five
	// fields with per-field ranges and names, lists, ranges and steps, @descriptors, @every and a
	// CRON_TZ= prefix. Reversed ranges (10-5) pass here and are caught by the controller.
	CronPattern = `^ *(?:(?:CRON_)?TZ=[A-Za-z0-9_+/-]+ +)?(?:@(?:yearly|annually|monthly|weekly|daily|midnight|hourly)|@every +(?:[0-9]+(?:[.][0-9]+)?(?:ns|us|µs|ms|s|m|h))+|(?:(?:[*?]|(?:[0-5]?[0-9])(?:-(?:[0-5]?[0-9]))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:[0-5]?[0-9])(?:-(?:[0-5]?[0-9]))?)(?:/0*[1-9][0-9]{0,2})?))* +(?:(?:[*?]|(?:[01]?[0-9]|2[0-3])(?:-(?:[01]?[0-9]|2[0-3]))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:[01]?[0-9]|2[0-3])(?:-(?:[01]?[0-9]|2[0-3]))?)(?:/0*[1-9][0-9]{0,2})?))* +(?:(?:[*?]|(?:0?[1-9]|[12][0-9]|3[01])(?:-(?:0?[1-9]|[12][0-9]|3[01]))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:0?[1-9]|[12][0-9]|3[01])(?:-(?:0?[1-9]|[12][0-9]|3[01]))?)(?:/0*[1-9][0-9]{0,2})?))* +(?:(?:[*?]|(?:0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(?:-(?:0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(?:-(?:0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(?:/0*[1-9][0-9]{0,2})?))* +(?:(?:[*?]|(?:0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(?:-(?:0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(?:-(?:0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(?:/0*[1-9][0-9]{0,2})?))*) *$`
	// RetentionPattern accepts Go durations plus a day unit: 168h, 7d, 1d12h, 90m.
	RetentionPattern = `^(?:[0-9]+(?:[.][0-9]+)?(?:ns|us|µs|ms|s|m|h|d))+$`
	// zeroRetentionPattern matches retentions that add up to zero.
	zeroRetentionPattern = `^(?:0+(?:[.]0+)?(?:ns|us|µs|ms|s|m|h|d))+$`
)

// VolumeBackupScheduleSpec says when to take VolumeBackups and how long to keep them.
type VolumeBackupScheduleSpec struct {
	// Schedule is a standard 5-field cron expression (minute hour day-of-month month
	// day-of-week), an @descriptor such as @daily, or @every <duration>; an optional CRON_TZ=
	// prefix sets the time zone.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule=`self.matches('^ *(?:(?:CRON_)?TZ=[A-Za-z0-9_+/-]+ +)?(?:@(?:yearly|annually|monthly|weekly|daily|midnight|hourly)|@every +(?:[0-9]+(?:[.][0-9]+)?(?:ns|us|µs|ms|s|m|h))+|(?:(?:[*?]|(?:[0-5]?[0-9])(?:-(?:[0-5]?[0-9]))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:[0-5]?[0-9])(?:-(?:[0-5]?[0-9]))?)(?:/0*[1-9][0-9]{0,2})?))* +(?:(?:[*?]|(?:[01]?[0-9]|2[0-3])(?:-(?:[01]?[0-9]|2[0-3]))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:[01]?[0-9]|2[0-3])(?:-(?:[01]?[0-9]|2[0-3]))?)(?:/0*[1-9][0-9]{0,2})?))* +(?:(?:[*?]|(?:0?[1-9]|[12][0-9]|3[01])(?:-(?:0?[1-9]|[12][0-9]|3[01]))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:0?[1-9]|[12][0-9]|3[01])(?:-(?:0?[1-9]|[12][0-9]|3[01]))?)(?:/0*[1-9][0-9]{0,2})?))* +(?:(?:[*?]|(?:0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(?:-(?:0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec))(?:-(?:0?[1-9]|1[0-2]|(?i:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)))?)(?:/0*[1-9][0-9]{0,2})?))* +(?:(?:[*?]|(?:0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(?:-(?:0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(?:/0*[1-9][0-9]{0,2})?)(?:,(?:(?:[*?]|(?:0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat))(?:-(?:0?[0-6]|(?i:sun|mon|tue|wed|thu|fri|sat)))?)(?:/0*[1-9][0-9]{0,2})?))*) *$')`,message="schedule must be a cron expression with five fields (minute hour day-of-month month day-of-week) such as '0 */6 * * *', or @hourly, @daily, @weekly, @monthly or @every <duration>"
	Schedule string `json:"schedule"`
	// Pause stops creating backups; retention still runs.
	// +optional
	Pause bool `json:"pause,omitempty"`
	// MaxBackups keeps the N newest backups; 0 or unset keeps all. Ignored when
	// maxReservedTime is set.
	// +kubebuilder:validation:XValidation:rule="self >= 0",message="maxBackups cannot be negative (0 keeps every backup)"
	// +optional
	MaxBackups *int32 `json:"maxBackups,omitempty"`
	// MaxReservedTime deletes backups older than this: a Go duration (168h) or days (7d).
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule=`self.matches('^(?:[0-9]+(?:[.][0-9]+)?(?:ns|us|µs|ms|s|m|h|d))+$')`,message="maxReservedTime must be a duration such as 168h, 7d or 1d12h"
	// +kubebuilder:validation:XValidation:rule=`!self.matches('^(?:0+(?:[.]0+)?(?:ns|us|µs|ms|s|m|h|d))+$')`,message="maxReservedTime must be longer than zero"
	// +optional
	MaxReservedTime *string `json:"maxReservedTime,omitempty"`
	// BackupTemplate is the VolumeBackup spec of every scheduled backup.
	BackupTemplate VolumeBackupSpec `json:"backupTemplate"`
	// Verify drills the schedule's backups (fedbr extension): every Nth complete backup is
	// restored, one drill at a time, as a scratch restore with verify into the namespace it
	// names in every data plane, then deleted once judged, which removes everything the drill
	// made. The backup records the verdict (its Verified condition and status.verification).
	// +optional
	Verify *ScheduleVerify `json:"verify,omitempty"`
}

// ScheduleVerify is how a schedule drills its backups.
type ScheduleVerify struct {
	// Every drills the complete backup of every Nth tick (default 1: each); the first complete
	// backup is drilled at once. Ticks are counted on the schedule, so retention and skipped
	// ticks do not change which backups are drilled.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Every *int32 `json:"every,omitempty"`
	// Namespace is the data-plane namespace the drills restore into, in every plane: none of
	// the backup template's, holding no TidbCluster of the backed-up names, and one the agents'
	// policy maps to the schedule's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace"`
	// Timeout bounds a drill from its creation: one not judged by then is deleted, which stops
	// it and removes what it made (condition Drill, reason DrillTimedOut) (default 24h).
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="verify.timeout must be a positive duration such as 6h"
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// MaxBackupSize bounds what a drill restores: a backup whose full size (status.backupSize)
	// is larger is not drilled (condition Drill, reason DrillTooLarge); nor is one whose size is
	// never measured (the backup template's calcSizeLevel none). Unset: no bound.
	// +optional
	MaxBackupSize *resource.Quantity `json:"maxBackupSize,omitempty"`
	// Template is every drill's VolumeRestore template (warm-up, check, tolerations, resources,
	// images…); the schedule sets its scratch and verify. A check needs verify set here too.
	// +optional
	Template VolumeRestoreMemberSpec `json:"template,omitempty"`
}

// VolumeBackupScheduleStatus is the observed state of a VolumeBackupSchedule.
type VolumeBackupScheduleStatus struct {
	// ObservedGeneration is the generation the status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastBackup is the name of the last VolumeBackup created.
	// +optional
	LastBackup string `json:"lastBackup,omitempty"`
	// LastBackupTime is the scheduled time of that backup.
	// +optional
	LastBackupTime *metav1.Time `json:"lastBackupTime,omitempty"`
	// AllBackupCleanTime is when retention removed the last remaining backup.
	// +optional
	AllBackupCleanTime *metav1.Time `json:"allBackupCleanTime,omitempty"`
	// LastDrill is the schedule's latest drill (spec.verify): the backup, its tick, the
	// VolumeRestore and when it was created.
	// +optional
	LastDrill *ScheduleDrill `json:"lastDrill,omitempty"`
	// ResumeTime is when the controller saw the schedule resumed from spec.pause (fedbr): the
	// ticks missed while it was paused are not caught up, the next backup is at the next tick.
	// +optional
	ResumeTime *metav1.Time `json:"resumeTime,omitempty"`
	// Conditions are the API of progress.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ScheduleDrill is one drill of a schedule's backup.
type ScheduleDrill struct {
	// Backup is the VolumeBackup drilled; Scheduled its tick.
	Backup    string      `json:"backup"`
	Scheduled metav1.Time `json:"scheduled"`
	// Restore is the drill's VolumeRestore ("" when the backup was not drilled: it had a
	// verdict already, or it was too large); TimeStarted when the schedule created it.
	// +optional
	Restore string `json:"restore,omitempty"`
	// +optional
	TimeStarted *metav1.Time `json:"timeStarted,omitempty"`
}

// Condition types of a VolumeBackupSchedule.
const (
	// VolumeBackupScheduleDrillCondition says what the schedule's drills (spec.verify) do:
	// True while one runs or the schedule waits for the next backup to drill, False when the
	// latest drill timed out or its backup could not be drilled.
	VolumeBackupScheduleDrillCondition = "Drill"
	// VolumeBackupScheduleReadyCondition is True when the schedule is valid and running.
	VolumeBackupScheduleReadyCondition = "Ready"
	// VolumeBackupScheduleRetentionCondition is True while retention keeps up; False when it
	// waits for a backup whose clean fails, naming the backup and why.
	VolumeBackupScheduleRetentionCondition = "Retention"
	// VolumeBackupScheduleRetentionKeepsSnapshotsCondition is True when retention is on and
	// the backup template's cleanPolicy (Retain or OnFailure) keeps the snapshots and metadata of
	// the complete backups retention deletes, so they stay in AWS and S3 for ever; False when
	// retention's deletions clean (cleanPolicy Delete) or there is no retention.
	VolumeBackupScheduleRetentionKeepsSnapshotsCondition = "RetentionKeepsSnapshots"
)

// VolumeBackupSchedule creates VolumeBackups on a cron schedule and deletes old ones.
//
// +kubebuilder:validation:XValidation:rule="!has(self.spec.verify) || self.spec.backupTemplate.clusters.all(c, c.tcNamespace != self.spec.verify.namespace)",message="verify.namespace must not be a namespace the schedule backs up: a drill restores into a namespace of its own"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vbks,categories=fedbr
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="MaxBackups",type=integer,JSONPath=`.spec.maxBackups`
// +kubebuilder:printcolumn:name="MaxReservedTime",type=string,JSONPath=`.spec.maxReservedTime`
// +kubebuilder:printcolumn:name="LastBackup",type=string,JSONPath=`.status.lastBackup`,priority=1
// +kubebuilder:printcolumn:name="LastBackupTime",type=date,JSONPath=`.status.lastBackupTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type VolumeBackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec VolumeBackupScheduleSpec `json:"spec"`
	// +optional
	Status VolumeBackupScheduleStatus `json:"status,omitempty"`
}

// VolumeBackupScheduleList is a list of VolumeBackupSchedules.
//
// +kubebuilder:object:root=true
type VolumeBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VolumeBackupSchedule `json:"items"`
}
