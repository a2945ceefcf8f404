package restoremember

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	brrestoredata "github.com/fedbr/fedbr/internal/br/restoredata"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/meta"
)

// volumeOptions are the BR options (template.br.options) restore-volumes accepts: they choose
// the new volumes' type, performance and encryption.
var volumeOptions = []string{"--volume-type", "--volume-iops", "--volume-throughput", "--volume-encrypted", "--kms-key-id",
	"--tags", "--volume-scope", "--use-fsr", "--fsr-quota", "--concurrency", "--cleanup-timeout"}

// VolumesReadyValue is the tikv-volumes-ready annotation value: <namespace>/<member>.
func VolumesReadyValue(m *dpv1alpha1.VolumeRestoreMember) string { return m.Namespace + "/" + m.Name }

// planVolumes runs the restore-volume stage; it says whether TiKV runs on the restored volumes.
func (p *plan) planVolumes() bool {
	if !p.isTrue(dpv1alpha1.RestoreMemberVolumeCompleteCondition) && !p.planRestoreVolumes() {
		return false
	}
	if !p.planSyncWarmup() {
		return false
	}
	if p.m.Spec.DataMember && p.m.Spec.Phase == dpv1alpha1.RestoreMemberRestoreVolume && !p.armData() {
		return false
	}
	if p.isTrue(dpv1alpha1.RestoreMemberTikvCompleteCondition) {
		return true
	}
	tc := p.o.TC
	if tc == nil {
		p.fail(dpv1alpha1.TidbClusterNotFoundReason, p.tcMissing())
		return false
	}
	if tc.Annotations[pcv1alpha1.TiKVVolumesReadyAnnotation] != VolumesReadyValue(p.m) {
		p.add(Action{Kind: AnnotateTC, Key: pcv1alpha1.TiKVVolumesReadyAnnotation, Value: VolumesReadyValue(p.m)})
		return false
	}
	want, need := p.tikvNeeded()
	up := tidbcluster.StoresUp(tc)
	if up < need {
		return false // the TidbCluster's status update wakes us
	}
	msg := fmt.Sprintf("%d TiKV stores up in recovery mode on the restored volumes", up)
	if up < want {
		msg = fmt.Sprintf("%d of %d TiKV stores up in recovery mode on the restored volumes (tolerateSingleTiKVOutage)", up, want)
	}
	p.set(dpv1alpha1.RestoreMemberTikvCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberTiKVStartedReason, msg)
	return true
}

// tikvNeeded is the target's TiKV replicas and how many of them must be up: all, or with
// tolerateSingleTiKVOutage one fewer (as upstream). Only one store of the whole cluster may be
// down: restore-data, which sees every plane's stores, refuses more.
func (p *plan) tikvNeeded() (want, need int) {
	want = tidbcluster.TiKVReplicas(p.o.TC)
	if p.m.Spec.Template.TolerateSingleTiKVOutage && want > 1 {
		return want, want - 1
	}
	return want, want
}

func (p *plan) tcMissing() string {
	return fmt.Sprintf("TidbCluster %s/%s not found in data plane %s: create it with spec.recoveryMode: true before restoring",
		p.m.Spec.TCNamespace, p.m.Spec.TCName, p.m.Spec.K8sClusterName)
}

// planRestoreVolumes validates, runs restore-volumes and rebuilds the PVs/PVCs; it says
// whether VolumeComplete was reached.
func (p *plan) planRestoreVolumes() bool {
	rv := p.o.RestoreVolumes
	st, reported := p.o.Report.Step(job.StepRestoreVolumes)
	if reported && st.Volumes > 0 {
		p.res.Status.VolumesTotal = st.Volumes
	}
	done, reason, msg := p.stepOutcome(job.StepRestoreVolumes, rv, dpv1alpha1.RestoreMemberRestoreVolumesFailedReason)
	switch {
	case msg != "":
		p.fail(reason, msg)
		return false
	case done:
		return p.rebuild()
	case reported && st.Backup != nil && !p.isTrue(dpv1alpha1.RestoreMemberTargetCheckedCondition):
		p.checkBackup()
		return false
	case rv.Exists() || reported:
		return false
	}
	storage, pd, ok := p.validate()
	if !ok {
		return false
	}
	args := []string{"br", job.StepRestoreVolumes, "--storage", storage.Flag, "--restore-id", string(p.m.UID), "--pd", strings.Join(pd, ",")}
	if p.m.Spec.AZName != "" {
		args = append(args, "--target-az", p.m.Spec.AZName)
	}
	if br := p.m.Spec.Template.BR; br != nil {
		args = append(args, br.Options...)
	}
	if t := &p.m.Spec.Template; t.Warmup != fedv1alpha1.RestoreWarmupNone && t.EffectiveWarmupStrategy() == fedv1alpha1.RestoreWarmupStrategyFsr &&
		!slices.ContainsFunc(args, func(a string) bool { return a == "--use-fsr" || strings.HasPrefix(a, "--use-fsr=") }) {
		args = append(args, "--use-fsr") // the fsr warm-up reads only the other volumes
	}
	if p.o.Policy != nil && p.o.Policy.UpstreamBackups() {
		args = append(args, "--allow-upstream-backup")
	}
	args = append(args, "--member", p.m.Name)
	args = append(args, p.o.Env.OwnerArgs(p.m.Namespace)...)
	args = append(args, job.SourceNamespaceArgs(p.o.Policy.DataNamespaces(p.m.Labels[dpv1alpha1.LabelOwnerNamespace]))...)
	p.createJob(p.jobSpec(job.StepRestoreVolumes, args, storage, 0))
	return false
}

// validate checks everything restore-volumes needs before any volume is created.
func (p *plan) validate() (job.Storage, []string, bool) {
	tc := p.o.TC
	if tc == nil {
		p.fail(dpv1alpha1.TidbClusterNotFoundReason, p.tcMissing())
		return job.Storage{}, nil, false
	}
	if !tc.Spec.RecoveryMode {
		p.fail(dpv1alpha1.RestoreMemberNotInRecoveryModeReason, fmt.Sprintf("TidbCluster %s/%s is not in recovery mode: set spec.recoveryMode: true (and no TiKV data) before restoring into it", tc.Namespace, tc.Name))
		return job.Storage{}, nil, false
	}
	pd, err := tidbcluster.PDAddresses(tc)
	if err != nil {
		// A fresh TidbCluster's PD reports its address a little after the restore starts: wait
		// (its status is watched); the manager's step timeout bounds the wait.
		return job.Storage{}, nil, false
	}
	storage, err := job.StorageFor(p.m.Spec.Backup)
	if err != nil {
		p.fail(dpv1alpha1.InvalidStorageReason, "spec.backup: "+err.Error())
		return job.Storage{}, nil, false
	}
	if err := validateOptions(p.m.Spec.Template.BR); err != nil {
		p.fail(dpv1alpha1.RestoreMemberInvalidOptionsReason, err.Error())
		return job.Storage{}, nil, false
	}
	return storage, pd, true
}

// checkBackup checks the target against the backup restore-volumes reported, before the step
// creates any volume: a usable report, TiKV replicas equal to the backup's store count, TiKV
// encryption at rest the restored data can be read with (CheckEncryption), and a target TiKV
// would run on (checkTarget). TargetChecked=True lets the step go on; a refusal
// fails the member, which ends the step.
func (p *plan) checkBackup() {
	if !p.backupUsable() {
		return
	}
	tc, bm := p.o.TC, p.o.BackupMeta
	if !tc.Spec.RecoveryMode {
		p.fail(dpv1alpha1.RestoreMemberNotInRecoveryModeReason, fmt.Sprintf("TidbCluster %s/%s left recovery mode before the restore created its volumes: set spec.recoveryMode: true (and no TiKV data) before restoring into it", tc.Namespace, tc.Name))
		return
	}
	if want, have := len(bm.TiKV.Stores), tidbcluster.TiKVReplicas(tc); want != have {
		p.fail(dpv1alpha1.RestoreMemberTiKVCountMismatchReason, fmt.Sprintf("the backup restore-volumes read has %d TiKV stores and TidbCluster %s/%s has spec.tikv.replicas %d: they must be equal",
			want, tc.Namespace, tc.Name, have))
		return
	}
	if limit := p.m.Spec.Template.MaxVolumes; limit != nil && len(bm.Volumes()) > int(*limit) {
		p.fail(dpv1alpha1.RestoreMemberTooManyVolumesReason, fmt.Sprintf("the backup restore-volumes read has %d volumes in this plane, more than template.maxVolumes %d: none was created",
			len(bm.Volumes()), *limit))
		return
	}
	if err := CheckEncryption(bm, tc); err != nil {
		if errors.Is(err, ErrEncryptionMismatch) {
			p.fail(dpv1alpha1.RestoreMemberEncryptionMismatchReason, err.Error())
		} else {
			p.fail(dpv1alpha1.RestoreMemberInvalidBackupReason, "the backup restore-volumes read: "+err.Error())
		}
		return
	}
	p.res.Status.CommitTs = strconv.FormatUint(bm.ClusterInfo.ResolvedTS, 10)
	p.res.Status.VolumesTotal = int32(min(len(bm.Volumes()), math.MaxInt32))
	if !p.checkTarget(bm, true) {
		return
	}
	p.set(dpv1alpha1.RestoreMemberTargetCheckedCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberTargetMatchesReason,
		fmt.Sprintf("TidbCluster %s/%s matches the backup restore-volumes read: %d TiKV stores, %d volumes, their claims free", tc.Namespace, tc.Name,
			len(bm.TiKV.Stores), len(bm.Volumes())))
}

// checkTarget refuses a target whose TiKV would not run on the restored volumes: a TiKV
// volume layout other than the backup's, or a claim the restore needs that exists already
// and is not this restore's. Before restore-volumes (beforeVolumes, rec the backupmeta) a
// backup whose claims cannot be rebuilt is refused too. It says whether the restore goes on.
func (p *plan) checkTarget(rec *meta.Record, beforeVolumes bool) bool {
	tc := p.o.TC
	names, err := ClaimNames(rec, tc.Name)
	if err != nil {
		if beforeVolumes {
			p.fail(dpv1alpha1.RestoreMemberInvalidBackupReason, "the backup's TiKV claims cannot be rebuilt: "+err.Error())
		} else {
			p.fail(dpv1alpha1.RestoreMemberRebuildFailedReason, err.Error())
		}
		return false
	}
	if err := CheckLayout(rec, tc); err != nil {
		p.fail(dpv1alpha1.RestoreMemberVolumeLayoutMismatchReason, err.Error())
		return false
	}
	if p.o.TargetClaims == nil {
		return false // read whenever NeedsTargetClaims; the next reconcile has them
	}
	if err := CheckClaims(names, p.o.TargetClaims, string(p.m.UID), tc.Namespace); err != nil {
		p.fail(dpv1alpha1.RestoreMemberClaimConflictReason, err.Error())
		return false
	}
	return true
}

// backupUsable turns restore-volumes' report of the backup into a verdict: a report out of
// bounds or unreadable fails the member InvalidReport, one that is not a valid backupmeta
// InvalidBackup.
func (p *plan) backupUsable() bool {
	err := p.o.BackupMetaErr
	switch {
	case err == nil && p.o.BackupMeta != nil:
		return true
	case err == nil:
		return false // not reported yet
	case errors.Is(err, meta.ErrInvalid) && !errors.Is(err, ErrReport):
		p.fail(dpv1alpha1.RestoreMemberInvalidBackupReason, "the backup restore-volumes read: "+err.Error())
	default:
		p.fail(dpv1alpha1.InvalidReportReason, err.Error())
	}
	return false
}

// validateOptions accepts only the BR options restore-volumes understands, and refuses a KMS
// key without encryption (AWS would refuse it after some volumes were already created).
func validateOptions(br *fedv1alpha1.BRConfig) error {
	if br == nil {
		return nil
	}
	var encrypted, kms bool
	for i := 0; i < len(br.Options); i++ {
		o := br.Options[i]
		name, value, hasValue := strings.Cut(o, "=")
		if !slices.Contains(volumeOptions, name) {
			return fmt.Errorf("br option %q: a volume restore accepts only %s", o, strings.Join(volumeOptions, ", "))
		}
		switch name {
		case "--volume-encrypted":
			encrypted = !hasValue || value == "true"
		case "--kms-key-id":
			kms = true
		}
		if !hasValue && name != "--volume-encrypted" && name != "--use-fsr" {
			i++ // the value is the next option
		}
	}
	if kms && !encrypted {
		return errors.New("br options: --kms-key-id needs --volume-encrypted")
	}
	return nil
}

// rebuild creates the TiKV PVs and PVCs of the restored volumes.
func (p *plan) rebuild() bool {
	switch err := p.o.RestoreMetaErr; {
	case err != nil:
		p.fail(dpv1alpha1.InvalidReportReason, "restore-volumes succeeded, but its report cannot be rebuilt from: "+err.Error())
		return false
	case p.o.RestoreMeta == nil:
		return false
	}
	tc := p.o.TC
	if tc == nil {
		p.fail(dpv1alpha1.TidbClusterNotFoundReason, p.tcMissing())
		return false
	}
	if !p.checkTarget(p.o.RestoreMeta, false) {
		return false
	}
	claims, err := p.claims()
	if err != nil {
		p.fail(dpv1alpha1.RestoreMemberRebuildFailedReason, err.Error())
		return false
	}
	if !p.volumesOwned(claims) {
		return false
	}
	if n, want := Ordinals(claims), tidbcluster.TiKVReplicas(tc); n != want {
		p.fail(dpv1alpha1.RestoreMemberTiKVCountMismatchReason, fmt.Sprintf("the restored volumes serve %d TiKV members and TidbCluster %s/%s has spec.tikv.replicas %d", n, tc.Namespace, tc.Name, want))
		return false
	}
	// Every volume first, all at once; a claim only once this agent's cache holds its volume.
	// The claims are pre-bound (spec.volumeName): one that Kubernetes' volume binder syncs
	// before it knows the volume stays Pending until the binder's periodic resync (15 s by
	// default), which held TiKV's start on the restored volumes for 10–16 s in the lab.
	volumesSeen := true
	for _, c := range claims {
		if p.o.PVs[c.PV.Name] == nil {
			p.add(Action{Kind: CreatePV, PV: c.PV})
			volumesSeen = false
		}
	}
	// Once its PV exists (created by the actions before, or seen), each volume gets the
	// operator tags; the claims do not wait for them, VolumeComplete does.
	tagged := p.tagVolumes(claims)
	if p.isTrue(dpv1alpha1.RestoreMemberFailedCondition) {
		return false
	}
	if !volumesSeen {
		p.res.Status.VolumesTotal = int32(min(len(claims), math.MaxInt32))
		return false // the volumes' watch events bring the claims
	}
	for _, c := range claims {
		if p.o.PVCs[c.PVC.Name] == nil {
			p.add(Action{Kind: CreatePVC, PVC: c.PVC})
		}
	}
	if !tagged {
		p.res.Status.VolumesTotal = int32(min(len(claims), math.MaxInt32))
		if p.res.RequeueAfter == 0 {
			p.res.RequeueAfter = tagRecheck
		}
		return false
	}
	p.warnDroppedTags()
	p.warnWithoutFSR()
	if ci := p.o.RestoreMeta.ClusterInfo; ci != nil && ci.ResolvedTS > 0 {
		p.res.Status.CommitTs = strconv.FormatUint(ci.ResolvedTS, 10)
	}
	p.res.Status.VolumesTotal = int32(min(len(claims), math.MaxInt32))
	p.res.Status.VolumesReady = p.res.Status.VolumesTotal
	p.set(dpv1alpha1.RestoreMemberVolumeCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberVolumesRestoredReason,
		fmt.Sprintf("%d volumes restored and bound to TiKV claims of TidbCluster %s/%s", len(claims), tc.Namespace, tc.Name))
	return true
}

// tagRecheck is how soon the member looks again at volumes it tagged whose tags were not
// seen yet (EC2 shows tags eventually).
const tagRecheck = 2 * time.Second

// tagVolumes adds a TagVolume action for every restored volume that lacks its operator tags
// (restorevolumes.OperatorTags: its PV, claim and namespace) and says whether all carry them.
// A volume the tags would take past AWS's limit first loses copied tags
// (restorevolumes.FitTags); the action names them, and the agent says so in a Warning event.
func (p *plan) tagVolumes(claims []Claim) bool {
	byID, ok := p.describedVolumes("to tag them")
	if !ok {
		return false
	}
	tagged := true
	var missing []string
	for _, c := range claims {
		v, ok := byID[c.PV.Spec.CSI.VolumeHandle]
		if gone := p.volumeGone(c, v, ok); gone != "" {
			missing = append(missing, gone)
			continue
		}
		if !ok {
			// volumesOwned fails a volume that does not exist while its PV is to be created;
			// once it is, a volume not described (yet) is looked at again (tagRecheck).
			tagged = false
			continue
		}
		want := restorevolumes.OperatorTags(c.PV.Name, c.PVC.Name, c.PVC.Namespace)
		missing := map[string]string{}
		for k, val := range want {
			if v.Tags[k] != val {
				missing[k] = val
			}
		}
		if len(missing) == 0 {
			continue
		}
		tagged = false
		merged := map[string]string{}
		maps.Copy(merged, v.Tags)
		maps.Copy(merged, missing)
		_, drop, err := restorevolumes.FitTags(merged, cloud.MaxTags)
		if err != nil {
			p.fail(dpv1alpha1.RestoreMemberRebuildFailedReason, fmt.Sprintf("volume %s cannot take the operator tags: %v", v.ID, err))
			return false
		}
		p.add(Action{Kind: TagVolume, Name: v.ID, Tags: missing, IDs: drop})
	}
	if len(missing) > 0 {
		p.fail(dpv1alpha1.RestoreMemberRestoredVolumeMissingReason, "restored volumes are gone after their PVs were created: "+strings.Join(missing, "; "))
		return false
	}
	return tagged
}

// missingGrace is how long after its PV was created a restored volume EC2 does not describe
// is still taken for EC2's eventual consistency, not for a volume that is gone. The agent
// described the volume as this restore's before it created the PV (volumesOwned), and the
// step had waited until the volume was available, so this bounds a rare stale answer.
const missingGrace = time.Minute

// EC2's states of a volume on its way out.
const (
	volumeDeleting = "deleting"
	volumeDeleted  = "deleted"
)

// volumeGone says why the volume of claim c, whose PV exists, is gone ("" when it is not, or
// its PV does not exist yet: volumesOwned judges that). v is EC2's description (described
// false when EC2 left it out): a volume deleting, deleted or in error is gone at once; one not described
// is gone once its PV is older than missingGrace, and looked at again until then.
func (p *plan) volumeGone(c Claim, v cloud.Volume, described bool) string {
	pv := p.o.PVs[c.PV.Name]
	if pv == nil {
		return ""
	}
	id := c.PV.Spec.CSI.VolumeHandle
	switch {
	case described && (v.State == volumeDeleting || v.State == volumeDeleted || v.State == cloud.VolumeError):
		return fmt.Sprintf("volume %s of PV %s is %s", id, pv.Name, v.State)
	case !described && p.now.Sub(pv.CreationTimestamp.Time) >= missingGrace:
		return fmt.Sprintf("volume %s of PV %s: EC2 no longer describes it (InvalidVolume.NotFound), %s after the PV was created", id, pv.Name,
			p.now.Sub(pv.CreationTimestamp.Time).Round(time.Second))
	}
	return ""
}

// describedVolumes is the restored volumes as EC2 described them (Observed.RestoredVolumes,
// by id); when they could not be described it says so (Failed=False CloudUnreachable, the
// purpose why in the message), asks for a recheck and returns false.
func (p *plan) describedVolumes(why string) (map[string]cloud.Volume, bool) {
	if err := p.o.RestoredVolumesErr; err != nil {
		if why != "" {
			why = " " + why
		}
		p.set(dpv1alpha1.RestoreMemberFailedCondition, metav1.ConditionFalse, dpv1alpha1.RestoreMemberCloudUnreachableReason,
			fmt.Sprintf("describing the restored volumes%s: %v; retrying every %s", why, err, cloudRecheck))
		p.res.RequeueAfter = cloudRecheck
		return nil, false
	}
	return p.o.RestoredVolumes, true
}

// warnDroppedTags warns, as the volumes are complete, about the tags copied from the
// snapshots that restore-volumes left out (its result's droppedTags).
func (p *plan) warnDroppedTags() {
	var res struct {
		DroppedTags []string `json:"droppedTags"`
	}
	if ok, err := p.o.Report.Result(job.StepRestoreVolumes, &res); !ok || err != nil || len(res.DroppedTags) == 0 {
		return
	}
	p.add(Action{Kind: Warn, Key: ReasonTagsDropped, Value: fmt.Sprintf("restore-volumes created volumes without the tags %s copied from their snapshots, to stay within AWS's %d tags per volume with room for the operator tags",
		strings.Join(res.DroppedTags, ", "), cloud.MaxTags)})
}

// warnWithoutFSR sends a Warning naming the data volumes' snapshots restore-volumes restored
// without the fast snapshot restore asked for, and why.
func (p *plan) warnWithoutFSR() {
	var res restorevolumes.Result
	if ok, err := p.o.Report.Result(job.StepRestoreVolumes, &res); !ok || err != nil || len(res.WithoutFSR) == 0 {
		return
	}
	var why []string
	for _, s := range res.WithoutFSR {
		why = append(why, s.SnapshotID+": "+s.Reason)
	}
	p.add(Action{Kind: Warn, Key: ReasonWithoutFSR, Value: fmt.Sprintf("restore-volumes restored the volumes of %d snapshots without fast snapshot restore; the warm-up reads them instead (%s)",
		len(res.WithoutFSR), strings.Join(why, "; "))})
}

// volumesOwned checks, while any PV is still to be created, that every volume the claims bind
// is this restore's: the volume ids come from restore-volumes' result, which the tenant's
// identity may write, and a PV on any other volume of the account (another cluster's TiKV
// volume) would hand its data to the restored cluster.
func (p *plan) volumesOwned(claims []Claim) bool {
	pending := false
	for _, c := range claims {
		pending = pending || p.o.PVs[c.PV.Name] == nil
	}
	if !pending {
		return true
	}
	byID, ok := p.describedVolumes("")
	if !ok {
		return false
	}
	var errs []error
	for _, c := range claims {
		id := c.PV.Spec.CSI.VolumeHandle
		v, ok := byID[id]
		if !ok {
			errs = append(errs, fmt.Errorf("volume %s: it does not exist in this account (rule %s): %w", id, meta.RuleRestoreTag, meta.ErrNotOwned))
			continue
		}
		if err := meta.CheckRestoredVolume(v, string(p.m.UID)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		p.fail(dpv1alpha1.RestoreMemberVolumeNotOwnedReason, fmt.Sprintf("restore-volumes reported volumes that are not this restore's: %v", err))
		return false
	}
	return true
}

// planData runs restore-data for the whole cluster.
func (p *plan) planData() {
	if p.isTrue(dpv1alpha1.RestoreMemberDataCompleteCondition) {
		return
	}
	rd := p.o.RestoreData
	done, reason, msg := p.stepOutcome(job.StepRestoreData, rd, dpv1alpha1.RestoreMemberRestoreDataFailedReason)
	_, reported := p.o.Report.Step(job.StepRestoreData)
	switch {
	case msg != "":
		p.fail(reason, msg)
		return
	case done:
		// The step's echo of the ts it restored to, for the manager to check against its decision.
		var sum brrestoredata.Result
		if _, err := p.o.Report.Result(job.StepRestoreData, &sum); err != nil || sum.ResolvedTS == 0 {
			p.fail(dpv1alpha1.InvalidReportReason, fmt.Sprintf("restore-data succeeded, but its result names no resolved ts it restored to (%v)", err))
			return
		}
		p.res.Status.RestoredTS = strconv.FormatUint(sum.ResolvedTS, 10)
		p.set(dpv1alpha1.RestoreMemberDataCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberDataRestoredReason,
			"regions recovered and the whole key space flashed back to "+p.res.Status.RestoredTS)
		return
	case rd.Exists() || reported:
		// An armed step starts on the member's phase restore-data, which it watches.
		return
	}
	p.startData(false)
}

// armData starts the data member's restore-data step armed while TiKV starts, so that its pod
// start is off the restore's critical path; it fails the member as soon as the armed step
// fails, without waiting for the go, and says whether the member goes on.
func (p *plan) armData() bool {
	if _, reason, msg := p.stepOutcome(job.StepRestoreData, p.o.RestoreData, dpv1alpha1.RestoreMemberRestoreDataFailedReason); msg != "" {
		p.fail(reason, msg)
		return false
	}
	p.startData(true)
	return !p.isTrue(dpv1alpha1.RestoreMemberFailedCondition)
}

// startData creates the restore-data Job; armed, it connects and waits for the go (phase
// restore-data in the member's spec).
func (p *plan) startData(armed bool) {
	if _, reported := p.o.Report.Step(job.StepRestoreData); p.o.RestoreData.Exists() || reported {
		return
	}
	pd, err := tidbcluster.PDAddresses(p.o.TC)
	if err != nil {
		p.fail(dpv1alpha1.NoPDAddressReason, err.Error())
		return
	}
	storage, err := job.StorageFor(p.m.Spec.Backup)
	if err != nil {
		p.fail(dpv1alpha1.InvalidStorageReason, "spec.backup: "+err.Error())
		return
	}
	if p.m.Spec.ResolvedTS == "" {
		// Admission refuses dataMember or phase restore-data without it (the CRD's rule).
		p.fail(dpv1alpha1.RestoreMemberRestoreDataFailedReason, "spec.resolvedTS is not set: the manager gives it with dataMember and phase restore-data")
		return
	}
	// The ts the manager decided travels as the step's flag; the step checks the backupmeta
	// agrees and reports the ts it restored to.
	args := []string{"br", job.StepRestoreData, "--pd", strings.Join(pd, ","), "--storage", storage.Flag, "--resolved-ts", p.m.Spec.ResolvedTS}
	if p.m.Spec.Template.TolerateSingleTiKVOutage {
		args = append(args, "--tolerate-single-tikv-outage")
	}
	// No --timeout: the manager times the member's restore-data phase (stepTimeout), and its
	// verdict stops the step (it deletes the members).
	args = append(args, "--member", p.m.Name)
	if armed {
		args = append(args, "--wait-start")
	}
	p.createJob(p.jobSpec(job.StepRestoreData, args, storage, dataRetries))
}

// dataRetries is how often the restore-data Job runs its step again after an attempt failed
// (unless the template sets backoffLimit): a restore-data pod deleted, evicted or killed, or a
// run that failed on a fault it could not ride out, is run again instead of failing the
// restore. A new attempt starts over — reads every region's metadata, plans, recovers and
// flashes back — which is safe on a cluster an earlier attempt left half done: the plan takes
// the replicas as they are now, and flashback to the same ts is idempotent per region.
const dataRetries = 2

// planFinish leaves recovery mode: spec.recoveryMode false, the TiKV pods that ran in
// recovery mode restarted, and every store up again.
func (p *plan) planFinish() {
	tc := p.o.TC
	if tc.Spec.RecoveryMode {
		p.add(Action{Kind: LeaveRecoveryMode})
	}
	recorded, ok := p.m.Annotations[AnnotationRecoveryPods]
	if !ok {
		var uids []string
		for _, pod := range p.o.Pods {
			if !pod.Deleting {
				uids = append(uids, string(pod.UID))
			}
		}
		sort.Strings(uids)
		recorded = strings.Join(uids, ",")
		p.add(Action{Kind: AnnotateMember, Key: AnnotationRecoveryPods, Value: recorded})
	}
	old := map[string]bool{}
	for _, u := range strings.Split(recorded, ",") {
		if u != "" {
			old[u] = true
		}
	}
	ready, left := 0, 0
	for _, pod := range p.o.Pods {
		switch {
		case old[string(pod.UID)]:
			left++
			if !pod.Deleting {
				p.add(Action{Kind: DeletePod, Name: pod.Name, UID: pod.UID})
			}
		case pod.Ready && !pod.Deleting:
			ready++
		}
	}
	_, need := p.tikvNeeded()
	if tc.Spec.RecoveryMode || left > 0 || ready < need || tidbcluster.StoresUp(tc) < need {
		return
	}
	p.set(dpv1alpha1.RestoreMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.RestoreMemberRecoveryModeOffReason,
		fmt.Sprintf("%d TiKV restarted out of recovery mode, stores up", ready))
	if p.res.Status.TimeCompleted == nil {
		t := metav1.NewTime(p.now.UTC().Truncate(1e9))
		p.res.Status.TimeCompleted = &t
	}
}
