package restoremember

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/meta"
)

// The agent reads no backup storage: all it learns of the backup is what the restore-volumes
// step, which reads it with the operation's identity, reports in its status.steps entry — the
// backup (restorevolumes.BackupReport) before any volume exists, the restored volumes in its
// result. The tenant's identity may write that entry, so both are untrusted input: bounded here,
// validated as a backupmeta (meta.Record.ValidateBackup), and every restored volume is still
// described in EC2 and must carry this restore's identity before a PV binds it (volumesOwned).
const (
	// MaxBackupReportBytes bounds the reported backup (JSON): about 1 KiB per volume, far
	// below etcd's 1.5 MiB per object.
	MaxBackupReportBytes = 1 << 20
	// MaxResultBytes bounds restore-volumes' result (JSON).
	MaxResultBytes = 512 << 10
	// MaxReportVolumes bounds the volumes one data plane's restore reports.
	MaxReportVolumes = 1000
	// MaxClaimLabels bounds the labels of one reported claim (copied to the rebuilt PV and PVC).
	MaxClaimLabels = 64
)

// ErrReport marks a restore-volumes report the agent refuses (InvalidReport): too large, not
// JSON of its shape, out of bounds. A report that reads but is not a valid backupmeta wraps
// meta.ErrInvalid instead (InvalidBackup).
var ErrReport = errors.New("restore-volumes' report refused")

// ReportedBackup reads the backup the restore-volumes step reported in its entry st; nil
// without one (the step has not read it yet).
func ReportedBackup(st dpv1alpha1.StepReport) (*meta.Record, error) {
	if st.Backup == nil || len(st.Backup.Raw) == 0 {
		return nil, nil
	}
	raw := st.Backup.Raw
	if len(raw) > MaxBackupReportBytes {
		return nil, fmt.Errorf("%w: the backup is %d bytes, at most %d", ErrReport, len(raw), MaxBackupReportBytes)
	}
	rec, err := meta.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: the backup: %w", ErrReport, err)
	}
	if n := len(rec.Volumes()); n > MaxReportVolumes {
		return nil, fmt.Errorf("%w: the backup lists %d volumes, at most %d", ErrReport, n, MaxReportVolumes)
	}
	if err := rec.ValidateBackup(); err != nil {
		return nil, err
	}
	k := rec.Kubernetes
	if n := len(rec.Volumes()); len(k.PVs) > n || len(k.PVCs) > n {
		return nil, fmt.Errorf("%w: the backup lists %d PVs and %d PVCs for %d volumes", ErrReport, len(k.PVs), len(k.PVCs), n)
	}
	for i, b := range k.PVs {
		pv := &corev1.PersistentVolume{}
		if err := json.Unmarshal(b, pv); err != nil {
			return nil, fmt.Errorf("%w: kubernetes.pvs[%d]: %w", ErrReport, i, err)
		}
		if errs := validation.IsDNS1123Subdomain(pv.Name); len(errs) > 0 {
			return nil, fmt.Errorf("%w: kubernetes.pvs[%d] name %q: %s", ErrReport, i, pv.Name, errs[0])
		}
	}
	for i, b := range k.PVCs {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := json.Unmarshal(b, pvc); err != nil {
			return nil, fmt.Errorf("%w: kubernetes.pvcs[%d]: %w", ErrReport, i, err)
		}
		if err := checkClaim(pvc); err != nil {
			return nil, fmt.Errorf("%w: kubernetes.pvcs[%d]: %w", ErrReport, i, err)
		}
	}
	return rec, nil
}

// checkClaim bounds a reported claim: a valid name, at most MaxClaimLabels valid labels.
func checkClaim(pvc *corev1.PersistentVolumeClaim) error {
	if errs := validation.IsDNS1123Subdomain(pvc.Name); len(errs) > 0 {
		return fmt.Errorf("name %q: %s", pvc.Name, errs[0])
	}
	if len(pvc.Labels) > MaxClaimLabels {
		return fmt.Errorf("claim %s has %d labels, at most %d", pvc.Name, len(pvc.Labels), MaxClaimLabels)
	}
	for k, v := range pvc.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("claim %s label %q: %s", pvc.Name, k, errs[0])
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("claim %s label %s value %q: %s", pvc.Name, k, v, errs[0])
		}
	}
	return nil
}

// ReportedRestore is the restoremeta the agent rebuilds the claims from: the reported backup
// bm with the restored volume id and AZ of each volume restore-volumes' result r names. Every
// volume of the result must be one of bm's, once, with a volume id and an AZ that are valid.
func ReportedRestore(bm *meta.Record, r job.Report) (*meta.Record, error) {
	raw := r.Results[job.StepRestoreVolumes]
	if len(raw) > MaxResultBytes {
		return nil, fmt.Errorf("%w: the result is %d bytes, at most %d", ErrReport, len(raw), MaxResultBytes)
	}
	var res restorevolumes.Result
	if _, err := r.Result(job.StepRestoreVolumes, &res); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrReport, err)
	}
	if n := len(bm.Volumes()); len(res.Volumes) > n {
		return nil, fmt.Errorf("%w: the result lists %d volumes, the backup %d", ErrReport, len(res.Volumes), n)
	}
	type restored struct{ id, az string }
	byOld := map[string]restored{}
	for _, v := range res.Volumes {
		if _, dup := byOld[v.BackupVolumeID]; dup {
			return nil, fmt.Errorf("%w: the result lists backed-up volume %q twice", ErrReport, v.BackupVolumeID)
		}
		if errs := validation.IsValidLabelValue(v.AZ); len(errs) > 0 || len(v.AZ) > 32 {
			return nil, fmt.Errorf("%w: the result's volume %q: AZ %q is not a zone name", ErrReport, v.VolumeID, v.AZ)
		}
		byOld[v.BackupVolumeID] = restored{id: v.VolumeID, az: v.AZ}
	}
	out := bm.Clone()
	for si := range out.TiKV.Stores {
		for vi := range out.TiKV.Stores[si].Volumes {
			mv := &out.TiKV.Stores[si].Volumes[vi]
			if v, ok := byOld[mv.ID]; ok {
				mv.RestoreVolumeID, mv.RestoreAZ = v.id, v.az
				delete(byOld, mv.ID)
			}
		}
	}
	if len(byOld) > 0 {
		return nil, fmt.Errorf("%w: the result names volumes the backup does not list: %v", ErrReport, slices.Sorted(maps.Keys(byOld)))
	}
	if err := out.ValidateIDs(); err != nil {
		return nil, fmt.Errorf("%w: the result: %w", ErrReport, err)
	}
	return out, nil
}
