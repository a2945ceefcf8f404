package tidbcluster

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
)

// Get reads the TidbCluster namespace/name from the cache, and, when the cache does not have
// it, from live (the API server; nil skips that): a TidbCluster created just before its member
// is often not in the agent's cache yet, and "not found" fails a member for good. It returns
// nil without an error when the TidbCluster does not exist.
func Get(ctx context.Context, cached, live client.Reader, namespace, name string) (*pcv1alpha1.TidbCluster, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	tc := &pcv1alpha1.TidbCluster{}
	err := cached.Get(ctx, key, tc)
	if apierrors.IsNotFound(err) && live != nil {
		err = live.Get(ctx, key, tc)
	}
	switch {
	case err == nil:
		return tc, nil
	case apierrors.IsNotFound(err):
		return nil, nil
	}
	return nil, fmt.Errorf("get TidbCluster %s/%s: %w", namespace, name, err)
}
