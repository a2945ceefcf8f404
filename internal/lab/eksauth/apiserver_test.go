package eksauth_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/fedbr/fedbr/internal/cloud/aws/ekstoken"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/eksauth"
)

// TestAPIServerAuthenticatesEKSTokens: a real kube-apiserver (the lab's control plane, one
// cluster) with the authenticator as its token webhook, and the AWS double as STS: a client
// whose transport carries ekstoken's tokens (the manager's, signed with the lab's
// credentials for this cluster) is the mapped user, which RBAC authorizes; a token of
// another cluster and one signed 16 minutes ago get 401.
func TestAPIServerAuthenticatesEKSTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real control plane")
	}
	bin, err := controlplane.DefaultBinDir(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	const cluster = "eks1"

	double, err := awsdouble.Open(filepath.Join(dir, "aws"), awsdouble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = double.Close() })
	aws := httptest.NewServer(double)
	t.Cleanup(aws.Close)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	files, err := eksauth.WriteFiles(filepath.Join(dir, "eksauth"), "https://"+ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg, err := files.TLS()
	if err != nil {
		t.Fatal(err)
	}
	auth, err := eksauth.New(eksauth.Options{Cluster: cluster, STSEndpoint: aws.URL, Mappings: []eksauth.Mapping{labMapping}})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: auth, TLSConfig: tlsCfg, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = hs.Close() })

	st, err := controlplane.Up(ctx, controlplane.Options{Dir: filepath.Join(dir, "cp"), BinDir: bin, Clusters: []string{cluster},
		APIServerArgs: map[string][]string{cluster: files.APIServerArgs()}, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = controlplane.Down(context.Background(), filepath.Join(dir, "cp"), 5*time.Second) })

	admin, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	adminCS := kubernetes.NewForConfigOrDie(admin)
	// RBAC binds the user the lab's identity maps to, as the agent chart binds the manager's.
	if _, err := adminCS.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "fedbr-manager-view"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: labMapping.Username}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// RBAC's authorizer sees the binding through its informer: wait until it does.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sar, err := adminCS.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: labMapping.Username, ResourceAttributes: &authzv1.ResourceAttributes{Namespace: "default", Verb: "list", Resource: "pods"},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, err
	})
	if err != nil {
		t.Fatalf("waiting for RBAC to bind %s: %v", labMapping.Username, err)
	}

	// client has only the API server's address and CA; its credentials are src's tokens.
	client := func(tokenCluster string, now func() time.Time) *kubernetes.Clientset {
		t.Helper()
		src, err := ekstoken.New(ctx, ekstoken.Request{Cluster: tokenCluster, Region: "us-west-2"},
			ekstoken.Options{AWS: awsdouble.Config("us-west-2"), Now: now})
		if err != nil {
			t.Fatal(err)
		}
		cfg := &rest.Config{Host: admin.Host, TLSClientConfig: rest.TLSClientConfig{CAData: admin.CAData}}
		cfg.Wrap(src.Wrap)
		return kubernetes.NewForConfigOrDie(cfg)
	}

	manager := client(cluster, nil)
	who, err := manager.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with an EKS token: %v", err)
	}
	if u := who.Status.UserInfo; u.Username != labMapping.Username || !slices.Contains(u.Groups, "fedbr:managers") || !slices.Contains(u.Groups, "system:authenticated") {
		t.Fatalf("the API server sees %+v; want %s in fedbr:managers", u, labMapping.Username)
	}
	if _, err := manager.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing pods as %s (bound to view): %v", labMapping.Username, err)
	}
	if _, err := manager.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("listing secrets as %s (view has none): %v; want forbidden (RBAC sees the mapped user)", labMapping.Username, err)
	}

	for name, cs := range map[string]*kubernetes.Clientset{
		"another cluster's token": client("eks2", nil),
		"token signed 16 min ago": client(cluster, func() time.Time { return time.Now().Add(-16 * time.Minute) }),
	} {
		_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("%s: %v; want 401 Unauthorized", name, err)
		}
	}
}
