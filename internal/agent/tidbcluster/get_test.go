package tidbcluster

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
)

// TestGetConfirmsAMissTheCacheReports: a TidbCluster the cache has not seen yet but the API
// server has is found; one neither has is nil without an error.
func TestGetConfirmsAMissTheCacheReports(t *testing.T) {
	s := runtime.NewScheme()
	if err := pcv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "tidb-restored"}}
	stale := fake.NewClientBuilder().WithScheme(s).Build()
	live := fake.NewClientBuilder().WithScheme(s).WithObjects(tc).Build()
	ctx := context.Background()
	for _, tt := range []struct {
		name      string
		cached    client.Reader
		live      client.Reader
		wantFound bool
	}{
		{"in the cache", live, nil, true},
		{"only on the API server", stale, live, true},
		{"nowhere", stale, stale, false},
		{"not in the cache, no live reader", stale, nil, false},
	} {
		got, err := Get(ctx, tt.cached, tt.live, "tidb-restored", "basic")
		if err != nil || (got != nil) != tt.wantFound {
			t.Errorf("%s: got %v, %v; want found=%v", tt.name, got, err, tt.wantFound)
		}
	}
}
