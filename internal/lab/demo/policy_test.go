package demo

import (
	"fmt"
	"testing"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestAgentPolicyAllowsTheLab: the agents' --allow-namespaces lets the demo's members act in
// the namespaces the demo and the crash suite put them in, and nowhere else.
func TestAgentPolicyAllowsTheLab(t *testing.T) {
	d := &run{o: Options{Namespace: "tidb", RestoreNamespace: "tidb-restored"}}
	p, err := policy.New(policy.Config{AgentImage: "fedbr", StepServiceAccount: job.ServiceAccountName, SameNamespace: true,
		Namespaces: []string{d.namespaceMapping()}})
	if err != nil {
		t.Fatal(err)
	}
	member := func(ns string) policy.Member {
		return policy.Member{Namespace: ns, TCNamespace: ns, OwnerNamespace: controlNamespace}
	}
	for _, ns := range []string{"tidb", "tidb-restored", fmt.Sprintf(crashNamespace, 3), fmt.Sprintf(dayTwoName, 4) + "-restored",
		fmt.Sprintf(dayTwoName, 5) + "-2026-12-02t01-43-00-conflict"} {
		if vs := p.Check(member(ns)); len(vs) != 0 {
			t.Errorf("a lab member in %s is refused: %v", ns, vs)
		}
	}
	if vs := p.Check(member("kube-system")); policy.Reason(vs) != dpv1alpha1.NamespaceNotAllowedReason {
		t.Errorf("a lab member in kube-system: %v", vs)
	}
}

// TestLabRestoresMayUseTheLabsSnapshots: restore-volumes and clean use only snapshots tagged
// with a namespace among the policy's for the members' owner (--source-namespaces), so every
// namespace the lab takes backups in is among those of its control-plane namespace: the
// demo's restore into the restore namespace, and the crash and day-2 suites' restores, of a
// backup taken in the source namespace.
func TestLabRestoresMayUseTheLabsSnapshots(t *testing.T) {
	d := &run{o: Options{Namespace: "tidb", RestoreNamespace: "tidb-restored"}}
	p, err := policy.New(policy.Config{AgentImage: "fedbr", StepServiceAccount: job.ServiceAccountName, SameNamespace: true,
		Namespaces: []string{d.namespaceMapping()}})
	if err != nil {
		t.Fatal(err)
	}
	source := meta.Namespaces(p.DataNamespaces(controlNamespace))
	for _, ns := range []string{"tidb", "tidb-restored", fmt.Sprintf(crashNamespace, 3), fmt.Sprintf(dayTwoName, 4) + "-restored"} {
		if !source.Allows(ns) {
			t.Errorf("a snapshot of a lab backup in %s is outside the restores' --source-namespaces %s", ns, source)
		}
	}
}
