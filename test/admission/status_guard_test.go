package admission

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	brreport "github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/testenv"
)

// statusGuard is the members' status guard, the one file the agent's chart installs and the lab
// applies.
func statusGuard() string {
	return filepath.Join(env.RepoRoot, "charts", "fedbr-agent", "templates", "member-status-guard.yaml")
}

// as is a client acting as user (a service account's system:serviceaccount:<ns>:<name>), by
// impersonation: what a namespace editor may do with the built-in edit role.
func as(t *testing.T, user string) (client.Client, *rest.Config) {
	t.Helper()
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, cfg
}

// statusPatch merge-patches a member's status through the status subresource.
func statusPatch(ctx context.Context, c client.Client, obj client.Object, status map[string]any) error {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	return c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
}

// TestMemberStatusGuard: with the guard installed, the steps' service account (the step role
// only) may still report in status.steps, by the steps' own server-side apply, but is refused
// when it writes the conditions, phase or commit ts the agent and the manager act on; the agent
// (the verb confirm in ClusterRole fedbr-agent-namespaced) may write them.
func TestMemberStatusGuard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, f := range []string{statusGuard(), filepath.Join(env.RepoRoot, "config", "rbac", "agent_role.yaml")} {
		if _, err := env.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", f); err != nil {
			t.Fatalf("applying %s: %v", f, err)
		}
	}
	const ns = "guard"
	ensureNamespace(t, ns)
	step, agent := "system:serviceaccount:"+ns+":"+job.ServiceAccountName, "system:serviceaccount:"+ns+":fedbr-agent"
	for _, b := range []client.Object{
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fedbr-br", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fedbr-br-step"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: job.ServiceAccountName, Namespace: ns}}},
		// As the agent chart binds it with watchNamespaces: the namespaced rules in this namespace.
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "fedbr-agent", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "fedbr-agent-namespaced"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "fedbr-agent", Namespace: ns}}},
		// A namespace editor: the built-in edit role's own rules (envtest runs no controller
		// manager to aggregate them into edit).
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "editor", Namespace: ns},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:aggregate-to-edit"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "editor"}}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: job.ServiceAccountName, Namespace: ns}},
	} {
		if err := env.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}

	m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "fed-guarded", Namespace: ns},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "guarded", K8sClusterName: "dp1", TCName: "basic", TCNamespace: ns,
			Phase: dpv1alpha1.BackupMemberExecute, BackupTS: "42", Template: fedv1alpha1.VolumeBackupMemberSpec{
				StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}}}}
	if err := env.Client.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	r := &dpv1alpha1.VolumeRestoreMember{}
	rs := sample(t, "dataplane_v1alpha1_volumerestoremember.yaml")
	rs.SetNamespace(ns)
	if err := env.Client.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rs), r); err != nil {
		t.Fatal(err)
	}
	stepClient, stepCfg := as(t, step)
	agentClient, _ := as(t, agent)

	forged := map[string]map[string]any{
		"conditions": {"conditions": []any{map[string]any{"type": "Complete", "status": "True", "reason": "SnapshotsCompleted",
			"message": "forged", "lastTransitionTime": "2026-12-02T10:00:00Z"}}},
		"phase":    {"phase": "Complete"},
		"commitTs": {"commitTs": "7"},
	}
	// The policy is loaded asynchronously: wait, by dry runs (admission runs, nothing is
	// stored), until it refuses the step's forged condition, so no forgery lands before it.
	testenv.Eventually(t, "the guard refuses the step's forged Complete condition", time.Minute, func() (bool, string) {
		body, err := json.Marshal(map[string]any{"status": forged["conditions"]})
		if err != nil {
			return false, err.Error()
		}
		err = stepClient.Status().Patch(ctx, m, client.RawPatch(types.MergePatchType, body), client.DryRunAll)
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), "patch: " + errString(err)
	})
	want := "only the agent (RBAC verb confirm on volumebackupmembers/status) may change a VolumeBackupMember's status other than status.steps"
	for field, status := range forged {
		if err := statusPatch(ctx, stepClient, m, status); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the step's service account writes status.%s: %v; want refused with %q", field, err, want)
		}
	}
	// Why the guard is needed: a namespace editor cannot write the status itself, but may act as
	// the steps' service account.
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "editor",
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: "impersonate", Resource: "serviceaccounts", Name: job.ServiceAccountName}}}
	if err := env.Client.Create(ctx, sar); err != nil || !sar.Status.Allowed {
		t.Errorf("a namespace editor may not impersonate the steps' service account (%v, %+v): the guard's premise changed", err, sar.Status)
	}
	if err := statusPatch(ctx, stepClient, r, forged["conditions"]); err == nil || !strings.Contains(err.Error(), "VolumeRestoreMember's status other than status.steps") {
		t.Errorf("the step's service account writes a restore member's conditions: %v; want refused", err)
	}

	// The step reports in status.steps, through the steps' own sink (server-side apply).
	sink, err := brreport.NewMemberStep(stepCfg, dpv1alpha1.GroupVersion.WithKind("VolumeBackupMember"), "volumebackupmembers", ns, m.Name, job.StepSnapshot)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Apply(ctx, map[string]string{job.StepSnapshot: `{"phase":"Completed","backupTS":42}`}); err != nil {
		t.Fatalf("the step's report in status.steps: %v", err)
	}
	rsink, err := brreport.NewMemberStep(stepCfg, dpv1alpha1.GroupVersion.WithKind("VolumeRestoreMember"), "volumerestoremembers", ns, r.Name, job.StepRestoreVolumes)
	if err != nil {
		t.Fatal(err)
	}
	if err := rsink.Apply(ctx, map[string]string{job.StepRestoreVolumes: `{"phase":"Completed"}`}); err != nil {
		t.Fatalf("the step's report in a restore member's status.steps: %v", err)
	}

	// The agent may write every field.
	for field, status := range forged {
		if err := statusPatch(ctx, agentClient, m, status); err != nil {
			t.Errorf("the agent writes status.%s: %v", field, err)
		}
	}
	got := &dpv1alpha1.VolumeBackupMember{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		t.Fatal(err)
	}
	if s, ok := dpv1alpha1.Step(got.Status.Steps, job.StepSnapshot); !ok || s.Phase != "Completed" || got.Status.CommitTs != "7" {
		t.Errorf("status %+v: want the step's report and the agent's commit ts", got.Status)
	}
}

func errString(err error) string {
	if err == nil {
		return "allowed"
	}
	return err.Error()
}

// TestMemberStatusGuardListsEveryField: each validation of the guard compares every field of its
// kind's status but steps, so a status field added later is guarded or this fails.
func TestMemberStatusGuardListsEveryField(t *testing.T) {
	data, err := os.ReadFile(statusGuard())
	if err != nil {
		t.Fatal(err)
	}
	var policy struct {
		Spec struct {
			Validations []struct{ Expression string }
		}
	}
	if err := yaml.Unmarshal([]byte(strings.SplitN(string(data), "\n---\n", 2)[0]), &policy); err != nil {
		t.Fatal(err)
	}
	for resource, status := range map[string]any{"volumebackupmembers": dpv1alpha1.VolumeBackupMemberStatus{},
		"volumerestoremembers": dpv1alpha1.VolumeRestoreMemberStatus{}} {
		var expr string
		for _, v := range policy.Spec.Validations {
			if strings.Contains(v.Expression, "!= '"+resource+"'") {
				expr = v.Expression
			}
		}
		if expr == "" {
			t.Errorf("no validation for %s", resource)
			continue
		}
		typ := reflect.TypeOf(status)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			cmp := "object.?status.?" + name + " == oldObject.?status.?" + name
			if guarded := strings.Contains(expr, cmp); guarded != (name != "steps") {
				t.Errorf("%s: status.%s compared %v, want %v", resource, name, guarded, name != "steps")
			}
		}
	}
}
