package describe

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/agentlease"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestManagerDataPlaneRulesAreTheClusterRoles: what preflight asks each plane is what the
// agent chart grants the manager there.
func TestManagerDataPlaneRulesAreTheClusterRoles(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", "manager_dataplane_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(role.Rules, ManagerDataPlaneRules) {
		t.Errorf("ManagerDataPlaneRules %+v, config/rbac/manager_dataplane_role.yaml %+v", ManagerDataPlaneRules, role.Rules)
	}
}

// TestPreflight runs `fedbr preflight` against a real API server as the control plane and as
// data planes reached as several identities: the admin passes everything; an identity bound
// to fedbr-manager-dataplane passes; one bound to nothing fails the rights check naming what
// it may not do; a server nothing listens on fails that it answers. A service account's bound
// token (TokenRequest, as docs/install.md mints the manager's) with 8 days left passes the
// token check and the rights; one with 2 days left fails it, saying when it expires. The
// command exits non-zero.
func TestPreflight(t *testing.T) {
	if env == nil {
		t.Skip("needs the API server")
	}
	ctx := context.Background()
	b, err := os.ReadFile(filepath.Join(env.RepoRoot, "config", "rbac", "manager_dataplane_role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	role.Name = "preflight-manager-dataplane"
	if err := env.Client.Create(ctx, &role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	create(t, ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "preflight-manager"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "preflight-manager"},
			{Kind: rbacv1.ServiceAccountKind, Name: "preflight-remote", Namespace: "default"}}})
	create(t, ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "preflight-remote"}})
	kube, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	mint := func(d time.Duration) string {
		secs := int64(d / time.Second)
		tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, "preflight-remote",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}

	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	good, admin := cfg.Clusters[cur.Cluster], cfg.AuthInfos[cur.AuthInfo]
	planes := clientcmdapi.NewConfig()
	add := func(name string, cluster *clientcmdapi.Cluster, impersonate string) {
		u := admin.DeepCopy()
		u.Impersonate = impersonate
		planes.Clusters[name], planes.AuthInfos[name], planes.Contexts[name] = cluster, u, ctxOf(name)
	}
	bound := func(name, token string) {
		planes.Clusters[name], planes.AuthInfos[name], planes.Contexts[name] = good, &clientcmdapi.AuthInfo{Token: token}, ctxOf(name)
	}
	bound("e-bound", mint(8*24*time.Hour))
	bound("f-soon", mint(2*24*time.Hour))
	gone := good.DeepCopy()
	gone.Server = "https://127.0.0.1:1"
	add("a-admin", good, "")
	add("b-manager", good, "preflight-manager")
	add("c-nobody", good, "nobody")
	add("d-gone", gone, "")
	path := filepath.Join(t.TempDir(), "planes")
	if err := clientcmd.WriteToFile(*planes, path); err != nil {
		t.Fatal(err)
	}
	// The agents' Leases: a-admin's held and renewed now, e-bound's last renewed an hour ago,
	// f-soon's missing. The remote service account may read e-bound's and f-soon's (as the
	// agent chart's managerAccess lets the manager read its plane's), preflight-manager none.
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentlease.DefaultNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	lease := func(plane string, renewed time.Time) {
		create(t, ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name(plane)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("agent-pod_" + plane), LeaseDurationSeconds: ptr.To[int32](15),
				RenewTime: ptr.To(metav1.NewMicroTime(renewed))}})
	}
	lease("a-admin", time.Now())
	lease("e-bound", time.Now().Add(-time.Hour))
	create(t, ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: "preflight-agent-lease"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			ResourceNames: []string{agentlease.Name("e-bound"), agentlease.Name("f-soon")}, Verbs: []string{"get"}}}})
	create(t, ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: "preflight-agent-lease"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "preflight-agent-lease"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "preflight-remote", Namespace: "default"}}})
	out, err := execute(t, NewPreflightCmd, "--kubeconfig", env.Kubeconfig, "--planes-kubeconfig", path, "--request-timeout", "5s")
	if err == nil || !strings.Contains(err.Error(), "preflight: 7 of ") {
		t.Fatalf("preflight: %v; want 7 checks failed\n%s", err, out)
	}
	want := []string{
		`ok    control    fedbr's CRDs installed`,
		`ok    control    data planes' kubeconfig loads`,
		`ok    a-admin    API server answers`,
		`ok    a-admin    Kubernetes 1.30 or later`,
		`ok    a-admin    member CRDs served`,
		`ok    a-admin    the manager's rights (fedbr-manager-dataplane)`,
		`ok    b-manager  the manager's rights (fedbr-manager-dataplane)`,
		`FAIL  c-nobody   the manager's rights (fedbr-manager-dataplane): the identity may not get volumebackupmembers, list volumebackupmembers`,
		`FAIL  d-gone     API server answers: `,
		`ok    e-bound    token bound, 7 days or more left`,
		`ok    e-bound    the manager's rights (fedbr-manager-dataplane)`,
		`FAIL  f-soon     token bound, 7 days or more left: expires at `,
		`ok    a-admin    an agent runs (Lease fedbr-system/fedbr-agent-a-admin), held by agent-pod_a-admin`,
		`FAIL  b-manager  an agent runs (Lease fedbr-system/fedbr-agent-b-manager): the agent's lease is not readable: Lease fedbr-system/fedbr-agent-b-manager: `,
		`FAIL  c-nobody   an agent runs (Lease fedbr-system/fedbr-agent-c-nobody): the agent's lease is not readable`,
		`FAIL  e-bound    an agent runs (Lease fedbr-system/fedbr-agent-e-bound): the agent stopped renewing its lease: Lease fedbr-system/fedbr-agent-e-bound held by agent-pod_e-bound was last renewed 1h0m0s ago (it lasts 15s)`,
		`FAIL  f-soon     an agent runs (Lease fedbr-system/fedbr-agent-f-soon): no agent runs for this data plane: no Lease fedbr-system/fedbr-agent-f-soon (the agent runs with --leader-elect and --k8s-cluster-name "f-soon", in namespace fedbr-system?)`,
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("preflight does not say %q:\n%s", w, out)
		}
	}
	if strings.Contains(out, "d-gone     member CRDs") {
		t.Errorf("checks went on after the plane did not answer:\n%s", out)
	}
	// The role bound in namespace tidb only, as the agent chart binds it with watchNamespaces:
	// it passes with the manager's --dataplane-namespaces tidb, and fails naming the namespace
	// (or cluster-wide) where it is not bound.
	for _, ns := range []string{"tidb", "other"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	create(t, ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Name: "preflight-manager"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "preflight-ns-manager"}}})
	planes = clientcmdapi.NewConfig()
	add("g-ns", good, "preflight-ns-manager")
	if err := clientcmd.WriteToFile(*planes, path); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		namespaces string
		want       string
	}{
		{"tidb", `ok    g-ns       the manager's rights (fedbr-manager-dataplane) in tidb`},
		{"tidb,other", `FAIL  g-ns       the manager's rights (fedbr-manager-dataplane) in tidb, other: the identity may not get volumebackupmembers in other,`},
		{"", `FAIL  g-ns       the manager's rights (fedbr-manager-dataplane): the identity may not get volumebackupmembers, `},
	} {
		args := []string{"--kubeconfig", env.Kubeconfig, "--planes-kubeconfig", path, "--request-timeout", "5s"}
		if tc.namespaces != "" {
			args = append(args, "--dataplane-namespaces", tc.namespaces)
		}
		out, _ := execute(t, NewPreflightCmd, args...)
		if !strings.Contains(out, tc.want) {
			t.Errorf("preflight --dataplane-namespaces %q does not say %q:\n%s", tc.namespaces, tc.want, out)
		}
	}
}
