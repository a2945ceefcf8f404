package restoremember

import (
	"slices"
	"strings"
	"testing"

	apimeta "k8s.io/apimachinery/pkg/api/meta"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/policy"
)

// TestRestoreVolumesSourceNamespaces: restore-volumes is given, as --source-namespaces, the
// data-plane namespaces the agent's policy lets the member's owner (its owner-namespace
// label) act on, so it uses only snapshots tagged with one of them. A VolumeRestore in
// control-plane namespace ops restoring into dst (--allow-namespaces ops=dst,dst-*) from a
// backup taken in ops gets ops (same namespace), dst and dst-*.
func TestRestoreVolumesSourceNamespaces(t *testing.T) {
	argsOf := func(o Observed) []string {
		for _, a := range Plan(o, t0).Actions {
			if a.Kind == CreateJob && a.Job.Labels[job.LabelStep] == job.StepRestoreVolumes {
				return a.Job.Spec.Template.Spec.Containers[0].Args
			}
		}
		return nil
	}
	owned := func(owner string) func(*dpv1alpha1.VolumeRestoreMember) {
		return func(m *dpv1alpha1.VolumeRestoreMember) {
			m.Labels = map[string]string{dpv1alpha1.LabelOwnerNamespace: owner}
		}
	}
	mapped, err := policy.New(policy.Config{AgentImage: "fedbr:test", StepServiceAccount: job.ServiceAccountName, SameNamespace: true,
		Namespaces: []string{"ops=dst,dst-*", "other=elsewhere"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		owner string
		pol   *policy.Policy
		want  string
	}{
		{"the default policy: the namesake", "dst", policy.Default("fedbr:test", job.ServiceAccountName), "dst"},
		{"a mapped owner: its namesake and its mapped namespaces", "ops", mapped, "ops,dst,dst-*"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, owned(tt.owner)), targetTC(2, true))
			o.Policy = tt.pol
			args := argsOf(o)
			if args == nil {
				t.Fatalf("no restore-volumes Job planned: %+v", Plan(o, t0).Status.Conditions)
			}
			if got := argValue(args, "--source-namespaces"); got != tt.want {
				t.Fatalf("--source-namespaces %q, want %q (args %v)", got, tt.want, args)
			}
			if n := slices.Index(args, "--source-namespaces"); slices.Index(args[n+1:], "--source-namespaces") >= 0 {
				t.Fatalf("--source-namespaces given twice: %v", args)
			}
		})
	}
	// A template cannot widen the set through its BR options.
	asked := robs(rmember(dpv1alpha1.RestoreMemberRestoreVolume, owned("dst"), func(m *dpv1alpha1.VolumeRestoreMember) {
		m.Spec.Template.BR = &fedv1alpha1.BRConfig{Options: []string{"--source-namespaces=*"}}
	}), targetTC(2, true))
	res := Plan(asked, t0)
	failed := apimeta.FindStatusCondition(res.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition)
	if argsOf(asked) != nil || failed == nil || !strings.Contains(failed.Message, `br option "--source-namespaces=*"`) {
		t.Errorf("a template asking for every namespace: actions %v, Failed %+v; want no Job and the option refused", res.Actions, failed)
	}
}
