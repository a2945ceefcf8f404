package apply

import (
	"context"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fedbr/fedbr/internal/agent/job"
)

// TestEnsureServiceAccountUpdatesAnOldRole: the steps' Role an older agent created gains the
// rules the steps need now; the service account and binding are created once.
func TestEnsureServiceAccountUpdatesAnOldRole(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	_, want, _ := job.ServiceAccountObjects("ns")
	old := want.DeepCopy()
	old.Rules = old.Rules[:1]
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(old).Build()
	a := &Applier{Client: c}
	for range 2 {
		if err := a.EnsureServiceAccount(ctx, "ns"); err != nil {
			t.Fatal(err)
		}
	}
	got := &rbacv1.Role{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), got); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got.Rules, want.Rules) {
		t.Errorf("rules = %+v, want %+v", got.Rules, want.Rules)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "ns", Name: job.ServiceAccountName}, &rbacv1.RoleBinding{}); err != nil {
		t.Errorf("binding: %v", err)
	}
}
