package backupmember

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	brsnapshot "github.com/fedbr/fedbr/internal/br/snapshot"
)

// InputsConfigMapName is the ConfigMap holding the snapshot step's volume file and manifests.
func InputsConfigMapName(member string) string { return job.Name(member, "inputs") }

// observeSnapshot turns the snapshot's report and Job into SnapshotsCreated, Complete and
// Failed.
func (p *plan) observeSnapshot() {
	st, reported := p.o.Report.Step(job.StepSnapshot)
	sj := p.o.Snapshot
	if reported {
		if dpv1alpha1.SnapshotArmed(st) && !p.isTrue(dpv1alpha1.BackupMemberArmedCondition) {
			p.set(dpv1alpha1.BackupMemberArmedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotArmedReason,
				"the snapshot step runs; it needs nothing but the backup ts", time.Time{})
		}
		if st.Total > 0 {
			p.res.Status.SnapshotsTotal = int32(min(st.Total, math.MaxInt32))
		}
		p.res.Status.SnapshotsCompleted = int32(min(max(st.Done, 0), math.MaxInt32))
		if st.Phase == job.PhaseStarted || st.Phase == job.PhaseWaiting || st.Phase == job.PhaseCompleted {
			p.set(dpv1alpha1.BackupMemberSnapshotsCreatedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsStartedReason,
				fmt.Sprintf("%d snapshots started; the pause may be lifted", st.Total), time.Time{})
		}
	}
	if p.isTrue(dpv1alpha1.BackupMemberCompleteCondition) {
		return
	}
	var sum brsnapshot.Result
	hasResult, err := p.o.Report.Result(job.StepSnapshot, &sum)
	switch {
	case err != nil:
		p.fail(dpv1alpha1.InvalidReportReason, err.Error())
	case hasResult && (sj.Phase == job.Succeeded || st.Phase == job.PhaseCompleted):
		// Complete only once the agent itself confirmed the report in AWS (confirm.go).
		if !p.isTrue(dpv1alpha1.BackupMemberFailedCondition) && p.confirmed(sum) {
			p.complete(sum)
		}
	case reported && st.Phase == job.PhaseFailed:
		p.fail(dpv1alpha1.BackupMemberSnapshotFailedReason, "the snapshot step failed: "+st.Error)
	case sj.Phase == job.Failed:
		p.fail(dpv1alpha1.BackupMemberSnapshotJobFailedReason, sj.FailureText())
	case sj.Phase == job.Succeeded:
		p.fail(dpv1alpha1.InvalidReportReason, fmt.Sprintf("Job %s succeeded without reporting its result in the member's status.steps (%s)", sj.Name,
			job.StepSnapshot))
	}
	p.observeStall(st, reported)
}

// observeStall fails the member (ProgressStalled) when the snapshot step's wait for its
// snapshots has reported no progress for stallTimeout: since its progressAt, or, from a step
// that has not stamped one, since every snapshot started. The failure takes the route every
// failure takes: the manager tears the backup down, and the teardown stops the step
// (planSnapshot), which deletes the snapshots it started. A wait that moved within the window
// is looked at again when the window would end.
func (p *plan) observeStall(st dpv1alpha1.StepReport, reported bool) {
	sj := p.o.Snapshot
	if !reported || st.Phase != job.PhaseWaiting || !sj.Exists() || sj.Done() || sj.Deleting || sj.Suspended ||
		p.isTrue(dpv1alpha1.BackupMemberFailedCondition) || p.isTrue(dpv1alpha1.BackupMemberCompleteCondition) {
		return
	}
	since := timeOf(st.ProgressAt)
	if since.IsZero() {
		return // nothing to count from: the manager's timer of the member's phase (stepTimeout) bounds it
	}
	window := p.m.Spec.Template.EffectiveStallTimeout()
	if left := since.Add(window).Sub(p.now); left > 0 {
		p.requeueIn(left)
		return
	}
	p.fail(dpv1alpha1.ProgressStalledReason, fmt.Sprintf("the snapshot step's wait for its snapshots made no progress for %s (stallTimeout): %d of %d snapshots completed, %.2f%%, unchanged since %s; "+
		"the backup fails and the step deletes the snapshots it started. If AWS is only slow (a large first snapshot), raise spec.template.stallTimeout of the VolumeBackup",
		window, st.Done, st.Total, st.Percent, since.UTC().Format(time.RFC3339)))
}

func (p *plan) complete(sum brsnapshot.Result) {
	s := &p.res.Status
	s.SnapshotsTotal = int32(min(len(sum.Snapshots), math.MaxInt32))
	s.SnapshotsCompleted = s.SnapshotsTotal
	s.CommitTs = p.m.Spec.BackupTS // confirmed equal to the step's ts
	if s.TimeCompleted == nil {
		s.TimeCompleted = ptr.To(metav1.NewTime(p.now.UTC().Truncate(time.Second)))
	}
	p.set(dpv1alpha1.BackupMemberSnapshotsCreatedCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsStartedReason,
		fmt.Sprintf("%d snapshots started and backupmeta written", len(sum.Snapshots)), time.Time{})
	p.set(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason,
		fmt.Sprintf("%d snapshots of %d GiB of volumes completed at commit ts %s (confirmed in AWS)", len(sum.Snapshots), sum.SizeGiB, s.CommitTs), time.Time{})
}

// snapshotsDone says every snapshot completed: this agent's condition, or the step's own report
// in the member's status.steps, which the manager may already have torn the member down on
// while this agent has not turned it into Complete yet. A step that reported it is never
// stopped: it only has to exit, and stopping it would make it delete what it completed.
func (p *plan) snapshotsDone() bool {
	s, _ := dpv1alpha1.Step(p.m.Status.Steps, dpv1alpha1.StepSnapshot)
	return p.isTrue(dpv1alpha1.BackupMemberCompleteCondition) || dpv1alpha1.SnapshotsCompleted(s)
}

// planSnapshot starts the snapshot step in execute and stops it at an early teardown.
func (p *plan) planSnapshot() {
	sj := p.o.Snapshot
	done := p.snapshotsDone()
	if p.m.Spec.Phase == dpv1alpha1.BackupMemberTeardown && sj.Exists() && !sj.Done() && !sj.Deleting && !done {
		p.add(Action{Kind: DeleteJob, Name: sj.Name})
		p.fail(dpv1alpha1.BackupMemberTornDownReason, "the backup was torn down before the snapshots completed; the snapshot step was stopped and deletes the snapshots it started")
		return
	}
	if !NeedsDiscovery(p.m, sj, p.o.Report) {
		return
	}
	if p.m.Spec.Phase == dpv1alpha1.BackupMemberInitialize && (p.o.TC == nil || p.o.Cluster == nil) {
		return // armed once the cluster is observed; execute reports what is missing
	}
	args, storage, err := p.snapshotArgs()
	if err != nil {
		return // p.snapshotArgs failed the member with the reason
	}
	inputs, volumes, err := p.inputsConfigMap()
	if err != nil {
		p.fail(dpv1alpha1.BackupMemberVolumeDiscoveryFailedReason, err.Error())
		return
	}
	spec := p.jobSpec(job.StepSnapshot, args)
	withStorage(&spec, storage)
	spec.Pod.Volumes = append(spec.Pod.Volumes, corev1.Volume{Name: inputsVolume, VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: inputs.Name}}}})
	spec.Pod.VolumeMounts = append(spec.Pod.VolumeMounts, corev1.VolumeMount{Name: inputsVolume, MountPath: inputsMount, ReadOnly: true})
	if p.createJob(spec, Action{Kind: EnsureConfigMap, ConfigMap: inputs}) {
		p.res.Status.BackupPath = storage.Flag
		if len(p.res.Status.TiKVVolumes) == 0 {
			p.res.Status.TiKVVolumes = volumes // confirmed against at completion (confirm.go)
		}
	}
}

// snapshotArgs checks the step's inputs and returns its arguments; a problem fails the member
// with a reason that names it.
func (p *plan) snapshotArgs() ([]string, job.Storage, error) {
	tsArgs := []string{"--wait-backup-ts"} // armed: the ts comes in the member's spec.backupTS
	if p.m.Spec.BackupTS != "" {
		ts, err := strconv.ParseUint(p.m.Spec.BackupTS, 10, 64)
		if err != nil || ts == 0 {
			err = fmt.Errorf("spec.backupTS %q: want the TSO the initializer's pause holds", p.m.Spec.BackupTS)
			p.fail(dpv1alpha1.BackupMemberNoBackupTSReason, err.Error())
			return nil, job.Storage{}, err
		}
		tsArgs = []string{"--backup-ts", strconv.FormatUint(ts, 10)}
	}
	if p.o.TC == nil {
		err := errors.New(p.tcMissing())
		p.fail(dpv1alpha1.TidbClusterNotFoundReason, err.Error())
		return nil, job.Storage{}, err
	}
	pd, err := tidbcluster.PDAddresses(p.o.TC)
	if err != nil {
		p.fail(dpv1alpha1.NoPDAddressReason, err.Error())
		return nil, job.Storage{}, err
	}
	storage, err := storageOf(&p.m.Spec.Template)
	if err != nil {
		p.fail(dpv1alpha1.InvalidStorageReason, "storage: "+err.Error())
		return nil, job.Storage{}, err
	}
	args := []string{"br", job.StepSnapshot, "--storage", storage.Flag, "--backup-id", string(p.m.UID),
		"--cluster", p.m.Spec.K8sClusterName, "--pd", strings.Join(pd, ",")}
	args = append(args, tsArgs...)
	args = append(args, "--volumes", job.InPod(inputsMount+"/"+VolumesKey), "--manifest", job.InPod(inputsMount+"/"+TidbClusterKey))
	if p.o.Cluster != nil && len(p.o.Cluster.OperatorObjects) > 0 {
		args = append(args, "--manifest", job.InPod(inputsMount+"/"+OperatorObjectsKey))
	}
	args = append(args, "--member", p.m.Name)
	args = append(args, p.o.Env.OwnerArgs(p.m.Namespace)...)
	return append(append(args, p.o.Env.CloudArgs()...), p.o.Env.LogArgs()...), storage, nil
}

// inputsConfigMap discovers the TiKV volumes and writes them, with the TidbCluster, into the
// ConfigMap the snapshot step reads; it returns the volumes' ids too.
func (p *plan) inputsConfigMap() (*corev1.ConfigMap, []string, error) {
	if p.o.Cluster == nil {
		return nil, nil, fmt.Errorf("TiKV volumes of TidbCluster %s/%s were not observed", p.m.Spec.TCNamespace, p.m.Spec.TCName)
	}
	rec, err := Discover(*p.o.Cluster, p.m.Spec.K8sClusterName, string(p.m.UID))
	if err != nil {
		return nil, nil, err
	}
	vol, err := rec.Marshal()
	if err != nil {
		return nil, nil, err
	}
	tc, err := tidbClusterManifest(*p.o.Cluster)
	if err != nil {
		return nil, nil, err
	}
	data := map[string]string{VolumesKey: string(vol), TidbClusterKey: string(tc)}
	if objs := p.o.Cluster.OperatorObjects; len(objs) > 0 {
		if data[OperatorObjectsKey], err = operatorManifests(objs); err != nil {
			return nil, nil, err
		}
	}
	if n := len(data[VolumesKey]) + len(data[TidbClusterKey]) + len(data[OperatorObjectsKey]); n > maxInputsBytes {
		return nil, nil, fmt.Errorf("%w: the volume file and the manifests of TidbCluster %s/%s and the objects referencing it take %d bytes, more than the %d a ConfigMap holds",
			ErrVolumeDiscovery, p.m.Spec.TCNamespace, p.m.Spec.TCName, n, maxInputsBytes)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: InputsConfigMapName(p.m.Name), Namespace: p.m.Namespace,
			Labels: job.Selector(p.m.Name), OwnerReferences: []metav1.OwnerReference{ownerRef(p.m)}},
		Data: data,
	}
	ids := make([]string, 0, len(rec.Volumes()))
	for _, v := range rec.Volumes() {
		ids = append(ids, v.ID)
	}
	return cm, ids, nil
}

// tidbClusterManifest is the TidbCluster as a manifest the snapshot step keeps next to the
// backup (JSON is YAML): the whole object as read, without the server's bookkeeping and without
// status but its status.tikv.failureStores, the failed-over stores whose extra TiKV pods the
// backup took (a restore made from the manifest needs that many TiKV: fedbr restore create
// --with-tidbclusters).
func tidbClusterManifest(c Cluster) ([]byte, error) {
	raw, err := c.tidbClusterJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, err
	}
	failed, _, _ := unstructured.NestedMap(m, "status", "tikv", "failureStores")
	delete(m, "status")
	if len(failed) > 0 {
		m["status"] = map[string]any{"tikv": map[string]any{"failureStores": failed}}
	}
	m["apiVersion"], m["kind"] = "pingcap.com/v1alpha1", "TidbCluster"
	return json.Marshal(m)
}
