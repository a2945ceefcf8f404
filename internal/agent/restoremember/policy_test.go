package restoremember

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/policy"
)

// TestPlanPolicy: the agent's policy's verdict is an observed input. A refused member fails
// with the rule's name before any Job, volume or claim is planned; a warm-up that reads block
// devices is judged against the target TidbCluster's TiKV volumes before restore-volumes runs;
// the pod check refuses a warm-up Job the verdict let through.
func TestPlanPolicy(t *testing.T) {
	strict := policy.Default("fedbr:test", job.ServiceAccountName)
	privileged, err := policy.New(policy.Config{AgentImage: "fedbr:test", StepServiceAccount: job.ServiceAccountName, SameNamespace: true, PrivilegedWarmup: true})
	if err != nil {
		t.Fatal(err)
	}
	// judged observes the member with the policy p, its verdict computed as the controller does.
	judged := func(p *policy.Policy) func(*Observed) {
		return func(o *Observed) {
			o.Policy, o.Refusals = p, p.Check(policy.ForRestore(o.Member, otherTiKVVolumes(o.TC)))
		}
	}
	// owned is the manager's member: its owner's namespace, the backup under that namespace's
	// prefix.
	owned := func(m *dpv1alpha1.VolumeRestoreMember) {
		m.Labels = map[string]string{dpv1alpha1.LabelOwnerNamespace: m.Namespace}
		m.Spec.Backup.S3.Prefix = m.Namespace + "/" + m.Spec.Backup.S3.Prefix
	}
	warm := func(mode fedv1alpha1.RestoreWarmupMode, strategy fedv1alpha1.RestoreWarmupStrategy) func(*dpv1alpha1.VolumeRestoreMember) {
		return func(m *dpv1alpha1.VolumeRestoreMember) {
			m.Spec.Template.Warmup, m.Spec.Template.WarmupStrategy = mode, strategy
		}
	}
	dataOnly := func() *pcv1alpha1.TidbCluster {
		tc := targetTC(2, true)
		tc.Spec.TiKV.StorageVolumes = nil
		return tc
	}
	volumesIn := rcond(dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberVolumesRestoredReason)
	failedReason := func(r string) map[string]string { return map[string]string{dpv1alpha1.RestoreMemberFailedCondition: r} }
	for _, tt := range []struct {
		name string
		o    Observed
		want rwant
	}{
		{
			name: "within policy: restore-volumes starts as before",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, owned), targetTC(2, true), judged(strict)),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhasePending},
		},
		{
			name: "a hybrid warm-up of a TiKV with a raft volume needs a privileged warm-up: refused before any volume",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, owned, warm(fedv1alpha1.RestoreWarmupSync, "")), targetTC(2, true), judged(strict)),
			want: rwant{actions: nil, phase: PhaseFailed, reason: failedReason(dpv1alpha1.PrivilegedNotAllowedReason),
				msg: `spec.template.warmupStrategy "hybrid": a hybrid warm-up reads the TiKV volumes besides the data volume (tikv-raft) block by block`},
		},
		{
			name: "the same warm-up with --allow-privileged-warmup starts restore-volumes",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, owned, warm(fedv1alpha1.RestoreWarmupSync, "")), targetTC(2, true), judged(privileged)),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhasePending},
		},
		{
			name: "a hybrid warm-up of a data volume alone reads files: allowed",
			o:    robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, owned, warm(fedv1alpha1.RestoreWarmupSync, "")), dataOnly(), judged(strict)),
			want: rwant{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhasePending, check: func(t *testing.T, r Result) {
				if c := findCondition(r.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition); c != nil && c.Reason == dpv1alpha1.PrivilegedNotAllowedReason {
					t.Errorf("refused: %s", c.Message)
				}
			}},
		},
		{
			name: "a hostPath backup storage is refused before any step mounts it",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, owned, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Backup = fedv1alpha1.StorageProvider{Local: &fedv1alpha1.LocalStorageProvider{
					Volume:      corev1.Volume{Name: "b", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/etc"}}},
					VolumeMount: corev1.VolumeMount{Name: "b", MountPath: "/backup"}}}
			}), targetTC(2, true), judged(strict)),
			want: rwant{actions: nil, phase: PhaseFailed, reason: failedReason(dpv1alpha1.HostPathNotAllowedReason), msg: `spec.backup.local.volume.hostPath.path "/etc"`},
		},
		{
			name: "a restore from another control-plane namespace fails even without its TidbCluster",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Labels = map[string]string{dpv1alpha1.LabelOwnerNamespace: "team-a"}
			}), nil, judged(strict)),
			want: rwant{actions: nil, phase: PhaseFailed, reason: failedReason(dpv1alpha1.NamespaceNotAllowedReason), msg: `control-plane namespace "team-a" may not act`},
		},
		{
			name: "restore-data refused mid-way (the policy changed): failed, nothing started",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreData, append(tikvUp, owned, func(m *dpv1alpha1.VolumeRestoreMember) {
				m.Spec.Template.ServiceAccount = "admin"
			})...), handedOver(2), judged(strict)),
			want: rwant{actions: nil, phase: PhaseFailed, reason: failedReason(dpv1alpha1.ServiceAccountNotAllowedReason)},
		},
		{
			name: "a complete member's async warm-up refused (the policy changed): no Job, the restore stays complete",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreFinish, owned, warm(fedv1alpha1.RestoreWarmupAsync, fedv1alpha1.RestoreWarmupStrategyFio), volumesIn,
				rcond(dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberTiKVStartedReason),
				rcond(dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberRecoveryModeOffReason)), targetTC(2, false), judged(strict),
				func(o *Observed) {
					o.RestoreMeta = record(t)
					o.Pods = []TiKVPod{{Name: "restored-tikv-0", UID: "p0", Ready: true, Node: "node-a"}, {Name: "restored-tikv-1", UID: "p1", Ready: true, Node: "node-b"}}
				}),
			want: rwant{actions: nil, phase: PhaseComplete, reason: map[string]string{dpv1alpha1.RestoreMemberWarmUpCompleteCondition: dpv1alpha1.RestoreMemberWarmUpFailedReason},
				msg: "the warm-up was not started: refused by the agent's policy"},
		},
		{
			// The verdict was taken on a TidbCluster without storage volumes, the claims rebuilt
			// from the backup have a raft volume: the warm-up pods would be privileged, and the
			// builder refuses them.
			name: "the pod check refuses a privileged warm-up Job the verdict let through",
			o: robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, owned, warm(fedv1alpha1.RestoreWarmupSync, ""), volumesIn), targetTC(2, true),
				func(o *Observed) { o.RestoreMeta, o.Policy = record(t), strict }),
			want: rwant{actions: nil, phase: PhaseFailed, reason: failedReason(dpv1alpha1.PrivilegedNotAllowedReason),
				msg: `spec.containers[0].securityContext.privileged "true"`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { rcheck(t, Plan(tt.o, t0), tt.want) })
	}
}
