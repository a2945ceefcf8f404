package backupmember

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
)

func operatorObject(kind, ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(pcv1alpha1.GroupVersion.WithKind(kind))
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// TestObserveOperatorObjects: of the tidb-operator objects the API server holds (the lab's
// stand-in CRDs), those in the TidbCluster's namespace that reference it are found — through
// spec.clusters with or without a namespace, or a TidbInitializer's spec.cluster — and those
// that reference another cluster, or live in another namespace, are not.
func TestObserveOperatorObjects(t *testing.T) {
	if env == nil {
		t.Skip("needs a real API server; skipped in -short mode")
	}
	ctx := context.Background()
	c := env.Client
	for _, ns := range []string{"ops-a", "ops-b"} {
		must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "ops-a"}}
	ref := func(name, ns string) map[string]any {
		r := map[string]any{"name": name}
		if ns != "" {
			r["namespace"] = ns
		}
		return r
	}
	for _, o := range []*unstructured.Unstructured{
		operatorObject("TidbMonitor", "ops-a", "mon", map[string]any{"clusters": []any{ref("basic", "")}}),
		operatorObject("TidbMonitor", "ops-a", "other-mon", map[string]any{"clusters": []any{ref("other", "")}}),
		operatorObject("TidbDashboard", "ops-a", "dash", map[string]any{"clusters": []any{ref("other", "ops-a"), ref("basic", "ops-a")}}),
		operatorObject("TidbInitializer", "ops-a", "init", map[string]any{"cluster": ref("basic", "")}),
		operatorObject("TidbNGMonitoring", "ops-a", "ng-elsewhere", map[string]any{"clusters": []any{ref("basic", "ops-b")}}),
		operatorObject("TidbNGMonitoring", "ops-b", "ng-b", map[string]any{"clusters": []any{ref("basic", "ops-a")}}),
	} {
		must(t, c.Create(ctx, o))
	}
	objs, err := ObserveOperatorObjects(ctx, c, tc)
	must(t, err)
	var got []string
	for _, o := range objs {
		got = append(got, o.GetKind()+"/"+o.GetName())
	}
	if want := []string{"TidbMonitor/mon", "TidbDashboard/dash", "TidbInitializer/init"}; !slices.Equal(got, want) {
		t.Errorf("found %v, want %v", got, want)
	}
	doc, err := operatorManifests(objs)
	must(t, err)
	if docs := strings.Split(doc, "\n---\n"); len(docs) != 3 || strings.Contains(doc, "resourceVersion") || strings.Contains(doc, "managedFields") ||
		!strings.Contains(docs[0], `"kind":"TidbMonitor"`) {
		t.Errorf("manifests %s", doc)
	}
}

// TestSnapshotSavesTheOperatorObjects: with objects that reference the TidbCluster, the inputs
// ConfigMap carries them and the snapshot step gets a second --manifest; without, neither.
func TestSnapshotSavesTheOperatorObjects(t *testing.T) {
	mon := operatorObject("TidbMonitor", "tidb", "mon", map[string]any{"clusters": []any{map[string]any{"name": "basic"}}})
	for _, with := range []bool{true, false} {
		r := Plan(obs(member(dpv1alpha1.BackupMemberExecute), func(o *Observed) {
			o.Cluster = cluster()
			if with {
				o.Cluster.OperatorObjects = []unstructured.Unstructured{*mon}
			}
		}), t0)
		var inputs *corev1.ConfigMap
		var args []string
		for _, a := range r.Actions {
			switch {
			case a.ConfigMap != nil:
				inputs = a.ConfigMap
			case a.Job != nil && a.Job.Labels[job.LabelStep] == job.StepSnapshot:
				args = a.Job.Spec.Template.Spec.Containers[0].Args
			}
		}
		if inputs == nil || args == nil {
			t.Fatalf("with=%v: actions %v", with, r.Actions)
		}
		var manifests []string
		for i, a := range args {
			if a == "--manifest" {
				manifests = append(manifests, args[i+1])
			}
		}
		doc, has := inputs.Data[OperatorObjectsKey]
		switch {
		case with && (!has || !strings.Contains(doc, `"name":"mon"`) || !slices.Equal(manifests, []string{"etc/fedbr/backup/tidbcluster.json", "etc/fedbr/backup/operator-objects.yaml"})):
			t.Errorf("with a TidbMonitor: inputs %v, --manifest %v", inputs.Data, manifests)
		case !with && (has || len(manifests) != 1):
			t.Errorf("without: inputs %v, --manifest %v", inputs.Data, manifests)
		}
	}
}
