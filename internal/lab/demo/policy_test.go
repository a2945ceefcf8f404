package demo

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestAgentPolicyAllowsTheLab: the agents' --allow-namespaces lets the demo's members act in
// the namespaces the demo and the crash suite put them in, and nowhere else; their storage is
// under the control-plane namespace's prefix, as the default --allowed-storage wants it.
func TestAgentPolicyAllowsTheLab(t *testing.T) {
	d := &Harness{o: Options{Namespace: "tidb", RestoreNamespace: "tidb-restored"}, lab: &env.Lab{}}
	p, err := policy.New(policy.Config{AgentImage: "fedbr", StepServiceAccount: job.ServiceAccountName, SameNamespace: true,
		Namespaces: []string{d.namespaceMapping()}})
	if err != nil {
		t.Fatal(err)
	}
	// A schedule's backup of the day-2 suite: the deepest prefix the lab writes.
	b := d.NewBackup("demo-1")
	storage := b.Spec.Template.WithPrefix(func(p string) string { return volumebackupschedule.TickPrefix(p, time.Unix(0, 0)) })
	b.Spec.Template.StorageProvider = storage
	member := func(ns string) policy.Member {
		return policy.ForRestore(&dpv1alpha1.VolumeRestoreMember{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: map[string]string{dpv1alpha1.LabelOwnerNamespace: ControlNamespace}},
			Spec: dpv1alpha1.VolumeRestoreMemberSpec{TCNamespace: ns, Backup: b.Spec.Template.MemberStorage("dp1")}}, nil)
	}
	if vs := p.Check(policy.ForBackup(&dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Labels: map[string]string{dpv1alpha1.LabelOwnerNamespace: ControlNamespace}},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{TCNamespace: "tidb", Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: d.NewBackup("demo-2").Spec.Template.MemberStorage("dp1")}}})); len(vs) != 0 {
		t.Errorf("a lab backup member is refused: %v", vs)
	}
	for _, ns := range []string{"tidb", "tidb-restored", fmt.Sprintf(CrashNamespace, 3), fmt.Sprintf(DayTwoName, 4) + "-restored",
		fmt.Sprintf(DayTwoName, 5) + "-2026-12-02t01-43-00-conflict", fmt.Sprintf(DayTwoName, 11) + "-scratch"} {
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
	d := &Harness{o: Options{Namespace: "tidb", RestoreNamespace: "tidb-restored"}}
	p, err := policy.New(policy.Config{AgentImage: "fedbr", StepServiceAccount: job.ServiceAccountName, SameNamespace: true,
		Namespaces: []string{d.namespaceMapping()}})
	if err != nil {
		t.Fatal(err)
	}
	source := meta.Namespaces(p.DataNamespaces(ControlNamespace))
	for _, ns := range []string{"tidb", "tidb-restored", fmt.Sprintf(CrashNamespace, 3), fmt.Sprintf(DayTwoName, 4) + "-restored"} {
		if !source.Allows(ns) {
			t.Errorf("a snapshot of a lab backup in %s is outside the restores' --source-namespaces %s", ns, source)
		}
	}
}
