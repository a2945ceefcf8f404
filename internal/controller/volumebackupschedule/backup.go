package volumebackupschedule

import (
	"path"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// Labels every scheduled VolumeBackup carries besides the schedule's own, as upstream sets
// them. ScheduleLabel is the one the controller selects its backups by.
const (
	ScheduleLabel  = "tidb.pingcap.com/backup-schedule"
	InstanceLabel  = "app.kubernetes.io/instance"
	NameLabel      = "app.kubernetes.io/name"
	ManagedByLabel = "app.kubernetes.io/managed-by"

	nameValue      = "backup-schedule"
	managedByValue = "backup-schedule-operator"
)

// ScheduledAnnotation on a scheduled VolumeBackup is the tick it was created for (RFC 3339);
// retention counts age from it, not from creation, so a late creation does not extend a backup's
// life.
const ScheduledAnnotation = "federation.pingcap.com/scheduled-at"

// TickString is tick as it appears in a scheduled backup's name and storage prefix: UTC,
// yyyy-mm-ddthh-mm-ss (upstream's format, with its lowercase t).
func TickString(tick time.Time) string {
	return strings.ToLower(tick.UTC().Format("2006-01-02T15-04-05"))
}

// BackupName is the name of the backup for tick t: <schedule>-<TickString(t)>.
func BackupName(schedule string, t time.Time) string {
	return schedule + "-" + TickString(t)
}

// TickPrefix is where the backup of tick keeps its metadata under the template's prefix:
// path.Join(prefix, "-"+tick), upstream's layout, so each member ends up at
// <prefix>/-<tick>-<k8sClusterName> and no two ticks ever share a prefix.
func TickPrefix(prefix string, tick time.Time) string {
	return path.Join(prefix, "-"+TickString(tick))
}

// NewBackup is the VolumeBackup schedule s creates for tick: the backup template with a
// storage prefix of its own (TickPrefix, for every storage provider; upstream did it for S3
// only), the schedule's labels and annotations (less kubectl's bookkeeping and fedbr's own
// controls, such as force-remove) plus upstream's schedule labels, and the tick as
// ScheduledAnnotation, and the cleanPolicy of the schedule's BackupCleanPolicy (Delete when
// the schedule has retention and the template sets none) written in its spec. It has no owner reference on purpose: deleting a schedule must not
// garbage-collect its backups (and, with cleanPolicy Delete, their snapshots).
func NewBackup(s *fedv1alpha1.VolumeBackupSchedule, tick time.Time) *fedv1alpha1.VolumeBackup {
	labels := map[string]string{}
	for k, v := range s.Labels {
		labels[k] = v
	}
	labels[ScheduleLabel] = s.Name
	labels[InstanceLabel] = s.Name
	labels[NameLabel] = nameValue
	labels[ManagedByLabel] = managedByValue
	annotations := map[string]string{}
	for k, v := range s.Annotations {
		if k == corev1.LastAppliedConfigAnnotation || strings.HasPrefix(k, "fedbr.io/") {
			continue
		}
		annotations[k] = v
	}
	annotations[ScheduledAnnotation] = tick.UTC().Format(time.RFC3339)
	b := &fedv1alpha1.VolumeBackup{
		ObjectMeta: metav1.ObjectMeta{Name: BackupName(s.Name, tick), Namespace: s.Namespace, Labels: labels, Annotations: annotations},
		Spec:       *s.Spec.BackupTemplate.DeepCopy(),
	}
	b.Spec.Template.StorageProvider = b.Spec.Template.WithPrefix(func(p string) string { return TickPrefix(p, tick) })
	b.Spec.Template.CleanPolicy = s.Spec.BackupCleanPolicy()
	return b
}
