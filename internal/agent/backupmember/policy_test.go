package backupmember

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/policy"
)

// TestPlanPolicy: the agent's policy's verdict is an observed input. A refused member fails
// with the rule's name before any Job (or anything a Job needs) is planned; one refused later
// creates no new Job either, and the step that would have run says why. The policy's pod check
// refuses a Job the verdict let through (the last line).
func TestPlanPolicy(t *testing.T) {
	strict := policy.Default("fedbr:test", job.ServiceAccountName)
	// judged observes the member with the policy p, its verdict computed as the controller does.
	judged := func(p *policy.Policy) func(*Observed) {
		return func(o *Observed) { o.Policy, o.Refusals = p, p.Check(policy.ForBackup(o.Member)) }
	}
	// owned is the manager's member: its owner's namespace, its storage under that namespace's
	// prefix.
	owned := func(m *dpv1alpha1.VolumeBackupMember) {
		m.Labels[dpv1alpha1.LabelOwnerNamespace] = m.Namespace
		m.Spec.Template.S3.Prefix = m.Namespace + "/" + m.Spec.Template.S3.Prefix
	}
	image := func(img string) func(*dpv1alpha1.VolumeBackupMember) {
		return func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.Template.ToolImage = img }
	}
	complete := withCond(dpv1alpha1.BackupMemberCompleteCondition, metav1.ConditionTrue, dpv1alpha1.BackupMemberSnapshotsCompletedReason)
	failedReason := func(r string) map[string]string { return map[string]string{dpv1alpha1.BackupMemberFailedCondition: r} }
	for _, tt := range []struct {
		name string
		o    Observed
		want want
	}{
		{
			name: "the manager's member within policy starts its pause as before",
			o:    obs(member(dpv1alpha1.BackupMemberInitialize, owned, startPause), judged(strict)),
			want: want{actions: []ActionKind{EnsureServiceAccount, CreateJob}, phase: PhasePending},
		},
		{
			name: "a foreign image fails the member in its first reconcile, before any Job",
			o:    obs(member(dpv1alpha1.BackupMemberInitialize, owned, image("evil.example.com/br:1")), judged(strict), func(o *Observed) { o.Cluster = cluster() }),
			want: want{actions: nil, phase: PhaseFailed, reason: failedReason(dpv1alpha1.ImageNotAllowedReason),
				failMatch: `spec.template.toolImage "evil.example.com/br:1"`},
		},
		{
			name: "a backup writing under another tenant's prefix: no Job, no backup path",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, owned, func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.Template.S3.Prefix = "team-b/nightly-az1" }),
				judged(strict), func(o *Observed) { o.Cluster = cluster() }),
			want: want{actions: nil, phase: PhaseFailed, reason: failedReason(dpv1alpha1.StorageNotAllowedReason),
				failMatch: `spec.template.s3 "s3://bk/team-b/nightly-az1": not under a storage root of control-plane namespace "tidb"`,
				check: func(t *testing.T, r Result) {
					if len(r.Actions) != 0 || r.Status.BackupPath != "" {
						t.Errorf("actions %v, backupPath %q", r.Actions, r.Status.BackupPath)
					}
				}},
		},
		{
			name: "a member from another control-plane namespace: no Job, no inputs, no backup path",
			o: obs(member(dpv1alpha1.BackupMemberExecute, func(m *dpv1alpha1.VolumeBackupMember) {
				m.Labels[dpv1alpha1.LabelOwnerNamespace], m.Spec.BackupTS = "team-a", tsText
			}), judged(strict), func(o *Observed) { o.Cluster = cluster() }),
			want: want{actions: nil, phase: PhaseFailed, reason: failedReason(dpv1alpha1.NamespaceNotAllowedReason),
				failMatch: `metadata.namespace "tidb": control-plane namespace "team-a" may not act`,
				check: func(t *testing.T, r Result) {
					if len(r.Actions) != 0 || r.Status.BackupPath != "" {
						t.Errorf("actions %v, backupPath %q", r.Actions, r.Status.BackupPath)
					}
				}},
		},
		{
			name: "credential variables: the first rule is the reason, the message names each",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, owned, func(m *dpv1alpha1.VolumeBackupMember) {
				m.Spec.Template.Env = []corev1.EnvVar{{Name: "AWS_ACCESS_KEY_ID", Value: "AKIA"}, {Name: "AWS_SECRET_ACCESS_KEY", Value: "x"}}
			}), judged(strict)),
			want: want{actions: nil, reason: failedReason(dpv1alpha1.CredentialEnvNotAllowedReason), failMatch: `spec.template.env[1].name "AWS_SECRET_ACCESS_KEY"`},
		},
		{
			name: "refused while its pause runs (the policy changed): failed, the pause stopped, nothing started",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, owned, startPause, image("evil:1")), judged(strict), func(o *Observed) {
				o.Pause, o.Cluster = active(pauseName), cluster()
			}),
			want: want{actions: []ActionKind{StopJob}, reason: failedReason(dpv1alpha1.ImageNotAllowedReason)},
		},
		{
			name: "refused once complete: stays complete, the size step is refused and says why",
			o:    obs(member(dpv1alpha1.BackupMemberTeardown, owned, complete, image("evil:1")), judged(strict)),
			want: want{actions: nil, phase: PhaseComplete, notTrue: []string{dpv1alpha1.BackupMemberFailedCondition},
				reason: map[string]string{dpv1alpha1.BackupMemberSizedCondition: dpv1alpha1.BackupMemberSizeFailedReason}, failMatch: "(ImageNotAllowed)"},
		},
		{
			name: "refused when deleted: no clean Job, Cleaned says why",
			o: obs(member(dpv1alpha1.BackupMemberTeardown, owned, complete, deleting(fedv1alpha1.CleanPolicyDelete), image("evil:1"),
				func(m *dpv1alpha1.VolumeBackupMember) { m.Status.BackupPath = "s3://bk/nightly-az1" }), judged(strict)),
			want: want{actions: nil, phase: PhaseCleanFailed, reason: map[string]string{dpv1alpha1.BackupMemberCleanedCondition: dpv1alpha1.BackupMemberCleanFailedReason},
				failMatch: "cannot clean: refused by the agent's policy"},
		},
		{
			name: "refused when its pause died holding: no lift Job, GCResumed says why",
			o: obs(member(dpv1alpha1.BackupMemberExecute, owned, image("evil:1"), func(m *dpv1alpha1.VolumeBackupMember) { m.Spec.BackupTS = tsText }), judged(strict), func(o *Observed) {
				o.Pause = failed(pauseName, job.ReasonBackoffLimitExceeded)
				o.Snapshot = active(snapName)
				o.Report = report(map[string]string{job.StepPause: mustJSON(map[string]any{"phase": "Ready", "backupTS": backupTS, "serviceSafePoint": "fedbr-1"})})
			}),
			want: want{actions: nil, reason: map[string]string{dpv1alpha1.BackupMemberGCResumedCondition: dpv1alpha1.BackupMemberLiftFailedReason},
				failMatch: "cannot start the lift step: refused by the agent's policy"},
		},
		{
			// The verdict passed, but the pod the agent builds runs an image this policy does not
			// allow (the agent's --image is not the policy's): the builder refuses it.
			name: "the pod check refuses a Job the verdict let through",
			o: obs(member(dpv1alpha1.BackupMemberInitialize, owned), func(o *Observed) {
				o.Policy = policy.Default("registry.example.com/fedbr:v2", job.ServiceAccountName)
			}),
			want: want{actions: nil, phase: PhaseFailed, reason: failedReason(dpv1alpha1.ImageNotAllowedReason),
				failMatch: `spec.containers[0].image "fedbr:test"`},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { check(t, planned(t, tt.o), tt.want) })
	}
}
