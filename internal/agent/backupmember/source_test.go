package backupmember

import (
	"testing"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/policy"
)

// TestCleanSourceNamespaces: the clean is given, as --source-namespaces, the data-plane
// namespaces the agent's policy lets the member's owner (its owner-namespace label) act on, so
// it deletes only snapshots tagged with one of them.
func TestCleanSourceNamespaces(t *testing.T) {
	mapped, err := policy.New(policy.Config{AgentImage: "fedbr:test", StepServiceAccount: job.ServiceAccountName, SameNamespace: true,
		Namespaces: []string{"ops=tidb,tidb-*"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		owner string
		pol   *policy.Policy
		want  string
	}{
		{"the default policy: the namesake", "tidb", policy.Default("fedbr:test", job.ServiceAccountName), "tidb"},
		{"a mapped owner: its namesake and its mapped namespaces", "ops", mapped, "ops,tidb,tidb-*"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := member(dpv1alpha1.BackupMemberExecute, deleting(fedv1alpha1.CleanPolicyDelete), func(m *dpv1alpha1.VolumeBackupMember) {
				m.Labels[dpv1alpha1.LabelOwnerNamespace] = tt.owner
				m.Status.BackupPath = "s3://bk/nightly-az1"
				m.Spec.BackupTS = tsText
			})
			o := obs(m, func(o *Observed) { o.Policy = tt.pol })
			args := jobOf(t, planned(t, o), job.StepClean).Job.Spec.Template.Spec.Containers[0].Args
			if got := argValue(args, "--source-namespaces"); got != tt.want {
				t.Fatalf("--source-namespaces %q, want %q (args %v)", got, tt.want, args)
			}
		})
	}
}
