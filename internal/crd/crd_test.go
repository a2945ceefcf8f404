package crd_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedbr/fedbr/internal/crd"
	"github.com/fedbr/fedbr/internal/manager"
	"github.com/fedbr/fedbr/internal/metricsauth"
	"github.com/fedbr/fedbr/internal/testenv"
)

// contains fails the test unless err's message has every one of want.
func contains(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error, want one containing %q", what, want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not contain %q", what, err, w)
		}
	}
}

// TestManagerRefusesCRDsThatAreNotFedbrs runs the check against a real API server: fedbr's
// CRDs pass; a CRD of the same name whose schema lacks status.observedGeneration (as
// tidb-operator's BR Federation CRDs do) is refused, naming the CRD, the field and the
// migration; a missing CRD is refused, naming it and how to install it; and the manager does
// not start on such a cluster.
func TestManagerRefusesCRDsThatAreNotFedbrs(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}

	if err := crd.Check(ctx, env.Config, crd.Manager); err != nil {
		t.Fatalf("fedbr's own CRDs refused: %v", err)
	}
	// The manager's ClusterRole (config/rbac, copied into its chart) lets it read them.
	role := filepath.Join(env.RepoRoot, "config", "rbac", "manager_role.yaml")
	if out, err := env.Kubectl(ctx, "apply", "-f", role); err != nil {
		t.Fatal(out, err)
	}
	if out, err := env.Kubectl(ctx, "create", "clusterrolebinding", "fedbr-manager", "--clusterrole=fedbr-manager", "--user=fedbr-manager"); err != nil {
		t.Fatal(out, err)
	}
	asManager := rest.CopyConfig(env.Config)
	asManager.Impersonate = rest.ImpersonationConfig{UserName: "fedbr-manager"}
	testenv.Eventually(t, "the manager's identity reads the CRDs", 30*time.Second, func() (bool, string) {
		err := crd.Check(ctx, asManager, crd.Manager)
		return err == nil, errString(err)
	})

	// Upstream's schema: volumebackups without status.observedGeneration (its status
	// subresource kept, so the field alone is what is refused).
	var vb apiextensionsv1.CustomResourceDefinition
	if err := c.Get(ctx, client.ObjectKey{Name: "volumebackups.federation.pingcap.com"}, &vb); err != nil {
		t.Fatal(err)
	}
	status := vb.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"]
	delete(status.Properties, "observedGeneration")
	vb.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = status
	if err := c.Update(ctx, &vb); err != nil {
		t.Fatal(err)
	}
	err = crd.Check(ctx, env.Config, crd.Manager)
	contains(t, "upstream schema", err, "CRD volumebackups.federation.pingcap.com is not fedbr's", "status.observedGeneration",
		"br-federation-manager", "kubectl apply --server-side --force-conflicts -f charts/fedbr-manager/crds/", "docs/install.md")
	if err != nil && (strings.Contains(err.Error(), "volumerestores") || strings.Contains(err.Error(), "volumebackupschedules")) {
		t.Errorf("fedbr's other CRDs refused too: %v", err)
	}

	// Missing: volumerestores deleted (and gone, not just terminating).
	vr := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "volumerestores.federation.pingcap.com"}}
	if err := c.Delete(ctx, vr); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "volumerestores CRD gone", 30*time.Second, func() (bool, string) {
		err := c.Get(ctx, client.ObjectKeyFromObject(vr), vr)
		return apierrors.IsNotFound(err), "get: " + errString(err)
	})
	err = crd.Check(ctx, env.Config, crd.Manager)
	contains(t, "missing CRD", err, "CRD volumerestores.federation.pingcap.com is not installed", "charts/fedbr-manager/crds/", "config/crd/bases/",
		"CRD volumebackups.federation.pingcap.com is not fedbr's")

	// The manager does not start on this cluster, and says why.
	kubeconfig := filepath.Join(t.TempDir(), "planes")
	if err := testenv.WriteKubeconfig(kubeconfig, map[string]*testenv.Env{"dp1": env}); err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err = manager.Run(runCtx, manager.Options{Control: env.Config, Kubeconfig: kubeconfig, Metrics: metricsauth.Flags{Addr: "0"}, HealthAddr: "0",
		ProbeInterval: time.Second, ReloadCheck: time.Second, Log: testr.New(t)})
	if runCtx.Err() != nil {
		t.Fatal("the manager ran on a cluster whose CRDs are not fedbr's")
	}
	contains(t, "manager.Run", err, "volumerestores.federation.pingcap.com", "volumebackups.federation.pingcap.com")
}

func errString(err error) string {
	if err == nil {
		return "found"
	}
	return err.Error()
}

// TestProblem: each way a CRD can fail to be fedbr's, named.
func TestProblem(t *testing.T) {
	want := crd.Want{Name: "volumebackups.federation.pingcap.com", Version: "v1alpha1", Field: "status.observedGeneration"}
	fedbrs := func() *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"spec":   {Type: "object"},
					"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"observedGeneration": {Type: "integer"}}},
				}}}}}}}
	}
	now := metav1.Now()
	tests := []struct {
		name string
		edit func(*apiextensionsv1.CustomResourceDefinition)
		want []string // substrings of the problem; none: no problem
	}{
		{name: "fedbr's", edit: func(*apiextensionsv1.CustomResourceDefinition) {}},
		{name: "version not served", edit: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Served = false },
			want: []string{"does not serve version v1alpha1", "charts/fedbr-manager/crds/"}},
		{name: "another version only", edit: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Name = "v1beta1" },
			want: []string{"does not serve version v1alpha1"}},
		{name: "no schema", edit: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Schema = nil },
			want: []string{"is not fedbr's", "status.observedGeneration"}},
		{name: "upstream's status: no observedGeneration", edit: func(c *apiextensionsv1.CustomResourceDefinition) {
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["status"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
		}, want: []string{"is not fedbr's", "status.observedGeneration", "br-federation-manager"}},
		{name: "no status subresource", edit: func(c *apiextensionsv1.CustomResourceDefinition) { c.Spec.Versions[0].Subresources = nil },
			want: []string{"is not fedbr's", "no status subresource"}},
		{name: "being deleted", edit: func(c *apiextensionsv1.CustomResourceDefinition) { c.DeletionTimestamp = &now },
			want: []string{"is being deleted"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := fedbrs()
			tc.edit(c)
			err := crd.Problem(c, want)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			contains(t, tc.name, err, append(tc.want, want.Name)...)
		})
	}
}
