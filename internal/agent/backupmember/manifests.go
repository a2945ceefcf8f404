package backupmember

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/meta"
)

// OperatorObjectsKey is the inputs ConfigMap's file of the tidb-operator objects that reference
// the TidbCluster (multi-document YAML), saved with the backup beside the TidbCluster.
const OperatorObjectsKey = "operator-objects.yaml"

// maxInputsBytes bounds the inputs ConfigMap's data below the API server's 1 MiB object limit.
const maxInputsBytes = 1000 << 10

// +kubebuilder:rbac:groups=pingcap.com,resources=tidbmonitors;tidbdashboards;tidbinitializers;tidbngmonitorings,verbs=get;list

// ObserveOperatorObjects lists, in tc's namespace, the tidb-operator objects besides the
// TidbCluster (meta.OperatorKinds: TidbMonitor, TidbDashboard, TidbInitializer,
// TidbNGMonitoring) that reference tc: spec.clusters[] (spec.cluster for a TidbInitializer)
// naming it, in tc's namespace (a reference without a namespace is to the object's own). A kind
// whose CRD is not installed has none. Sorted by kind, then name. The kinds are listed at once.
func ObserveOperatorObjects(ctx context.Context, c client.Reader, tc *pcv1alpha1.TidbCluster) ([]unstructured.Unstructured, error) {
	kinds := meta.OperatorKinds[1:]
	found := make([][]unstructured.Unstructured, len(kinds))
	g, gctx := errgroup.WithContext(ctx)
	for i, kind := range kinds {
		g.Go(func() error { // one round trip each, at once (they sit before the snapshot step's start)
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(pcv1alpha1.GroupVersion.WithKind(kind + "List"))
			if err := c.List(gctx, list, client.InNamespace(tc.Namespace)); err != nil {
				if apimeta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
					return nil
				}
				return fmt.Errorf("list %ss in %s: %w", kind, tc.Namespace, err)
			}
			for _, o := range list.Items {
				if references(o, tc) {
					found[i] = append(found[i], o)
				}
			}
			sort.Slice(found[i], func(a, b int) bool { return found[i][a].GetName() < found[i][b].GetName() })
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.Concat(found...), nil
}

// references says o's spec names tc, as tidb-operator's TidbClusterRef does.
func references(o unstructured.Unstructured, tc *pcv1alpha1.TidbCluster) bool {
	refs, _, _ := unstructured.NestedSlice(o.Object, "spec", "clusters")
	if one, ok, _ := unstructured.NestedMap(o.Object, "spec", "cluster"); ok {
		refs = append(refs, one)
	}
	for _, r := range refs {
		ref, ok := r.(map[string]any)
		if !ok {
			continue
		}
		name, _ := ref["name"].(string)
		ns, _ := ref["namespace"].(string)
		if ns == "" {
			ns = o.GetNamespace()
		}
		if name == tc.Name && ns == tc.Namespace {
			return true
		}
	}
	return false
}

// operatorManifests is objs as one multi-document YAML (each document JSON, which is YAML),
// without status and server-set metadata; empty without objects.
func operatorManifests(objs []unstructured.Unstructured) (string, error) {
	docs := make([]string, 0, len(objs))
	for _, o := range objs {
		raw, err := cleanJSON(o.Object)
		if err != nil {
			return "", err
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return "", err
		}
		delete(m, "status")
		b, err := json.Marshal(m)
		if err != nil {
			return "", err
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "\n---\n"), nil
}
