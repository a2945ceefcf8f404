package operator

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
)

// TestAddressedTakesTheNamespaceDefaults: a TidbCluster without address annotations takes its
// namespace's; its own ip prefix or base port replaces both of the namespace's, a store id base
// of its own only that; the TidbCluster itself is not changed.
func TestAddressedTakesTheNamespaceDefaults(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "drill", Annotations: map[string]string{
		AnnotationIPPrefix: "127.0.111", AnnotationStoreIDBase: "1000", "other": "x"}}}
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme.Scheme).WithObjects(ns).Build()}
	for _, tt := range []struct {
		name      string
		ns        string
		own, want map[string]string
	}{
		{"none of its own", "drill", nil, map[string]string{AnnotationIPPrefix: "127.0.111", AnnotationStoreIDBase: "1000"}},
		{"its own base port wins over the namespace's prefix", "drill", map[string]string{AnnotationBasePort: "30000"},
			map[string]string{AnnotationBasePort: "30000", AnnotationStoreIDBase: "1000"}},
		{"its own store id base", "drill", map[string]string{AnnotationStoreIDBase: "7"}, map[string]string{AnnotationIPPrefix: "127.0.111", AnnotationStoreIDBase: "7"}},
		{"a namespace without them", "tidb", map[string]string{"a": "b"}, map[string]string{"a": "b"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: tt.ns, Annotations: tt.own}}
			got, err := r.addressed(context.Background(), tc)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Annotations) != len(tt.want) {
				t.Fatalf("annotations %v, want %v", got.Annotations, tt.want)
			}
			for k, v := range tt.want {
				if got.Annotations[k] != v {
					t.Errorf("annotations %v, want %v", got.Annotations, tt.want)
				}
			}
			if len(tc.Annotations) != len(tt.own) {
				t.Errorf("the TidbCluster itself changed: %v", tc.Annotations)
			}
		})
	}
}
