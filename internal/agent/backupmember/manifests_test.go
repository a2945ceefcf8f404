package backupmember

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/meta"
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

// countingReader counts the claims read one by one.
type countingReader struct {
	client.Reader
	mu        sync.Mutex
	claimGets []string
}

func (r *countingReader) Get(ctx context.Context, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	if _, ok := o.(*corev1.PersistentVolumeClaim); ok {
		r.mu.Lock()
		r.claimGets = append(r.claimGets, key.Name)
		r.mu.Unlock()
	}
	return r.Reader.Get(ctx, key, o, opts...)
}

// TestObserveClusterReadsUnlabelledClaimsToo: the TiKV claims come from one list by
// tidb-operator's labels, beside the pods; a claim a TiKV pod uses without those labels is still
// read, by name, and only it. Each claim's volume is read either way.
func TestObserveClusterReadsUnlabelledClaimsToo(t *testing.T) {
	if env == nil {
		t.Skip("needs a real API server; skipped in -short mode")
	}
	ctx := context.Background()
	c, ns := env.Client, "observe-claims"
	must(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	tikv := map[string]string{"app.kubernetes.io/instance": "basic", "app.kubernetes.io/component": "tikv"}
	for i, labels := range []map[string]string{tikv, nil} {
		name := fmt.Sprintf("tikv-basic-tikv-%d", i)
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + ns + "-" + strconv.Itoa(i)},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + strconv.Itoa(i)}},
			}}
		must(t, c.Create(ctx, pv))
		must(t, c.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name, AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}))
		must(t, c.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("basic-tikv-%d", i), Namespace: ns, Labels: tikv},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "tikv", Image: "tikv"}},
				Volumes: []corev1.Volume{{Name: "tikv", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}}}}))
	}
	r := &countingReader{Reader: c}
	cl, err := observeCluster(ctx, r, &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: ns}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(cl.Pods) != 2 || len(cl.PVCs) != 2 || len(cl.PVs) != 2 {
		t.Errorf("observed %d pods, %d claims, %d volumes; want 2 of each", len(cl.Pods), len(cl.PVCs), len(cl.PVs))
	}
	if !slices.Equal(r.claimGets, []string{"tikv-basic-tikv-1"}) {
		t.Errorf("claims read by name: %v; want only the unlabelled tikv-basic-tikv-1", r.claimGets)
	}
}

// TestBackupSavesTheWholeTidbCluster: the clustermeta's kubernetes.crd_tidb_cluster and the
// saved TidbCluster manifest are the TidbCluster as the API server holds it, not fedbr's
// reduced type: spec.tikv.config (a TOML string here), spec.tiflash, and fields no fedbr type
// knows survive (a restore reads TiKV's encryption off the config); the record keeps the
// status as upstream does, the manifest drops it, and neither carries managed fields or the
// server's bookkeeping.
func TestBackupSavesTheWholeTidbCluster(t *testing.T) {
	startAgent(t)
	ctx := context.Background()
	ns := "whole-tc"
	seedCluster(t, ctx, ns)
	c := env.Client
	const config = "[security.encryption]\ndata-encryption-method = \"aes256-ctr\"\n[security.encryption.master-key]\ntype = \"kms\"\nkey-id = \"0987dcba-09fe-87dc-65ba-ab0987654321\"\n"
	tc := &unstructured.Unstructured{}
	tc.SetGroupVersionKind(pcv1alpha1.GroupVersion.WithKind("TidbCluster"))
	tc.SetNamespace(ns)
	tc.SetName("basic")
	patch := []byte(`{"spec":{"tikv":{"config":` + strconv.Quote(config) + `,"evictLeaderTimeout":"3m"},` +
		`"tiflash":{"replicas":2,"baseImage":"pingcap/tiflash","storageClaims":[{"resources":{"requests":{"storage":"10Gi"}}}]},` +
		`"pvReclaimPolicy":"Retain"}}`)
	must(t, c.Patch(ctx, tc, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("kubectl")))

	must(t, c.Create(ctx, newMember(ns, dpv1alpha1.BackupMemberInitialize, fedv1alpha1.CleanPolicyDelete)))
	inputs := &corev1.ConfigMap{}
	eventually(t, "inputs ConfigMap", func() (bool, string) {
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: InputsConfigMapName("fed-b1")}, inputs)
		return err == nil, fmt.Sprint(err)
	})
	rec, err := meta.Parse([]byte(inputs.Data[VolumesKey]))
	if err != nil {
		t.Fatal(err)
	}
	saved := map[string][]byte{"crd_tidb_cluster": rec.Kubernetes.TidbCluster, "manifest": []byte(inputs.Data[TidbClusterKey])}
	for what, raw := range saved {
		var got unstructured.Unstructured
		if err := json.Unmarshal(raw, &got.Object); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if v, _, _ := unstructured.NestedString(got.Object, "spec", "tikv", "config"); v != config {
			t.Errorf("%s: spec.tikv.config %q, want %q", what, v, config)
		}
		if v, _, _ := unstructured.NestedString(got.Object, "spec", "tikv", "evictLeaderTimeout"); v != "3m" {
			t.Errorf("%s: spec.tikv.evictLeaderTimeout %q, want 3m", what, v)
		}
		if v, _, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "tiflash", "replicas"); v != float64(2) {
			t.Errorf("%s: spec.tiflash.replicas %v, want 2: %s", what, v, raw)
		}
		if v, _, _ := unstructured.NestedSlice(got.Object, "spec", "tiflash", "storageClaims"); len(v) != 1 {
			t.Errorf("%s: spec.tiflash.storageClaims %v", what, v)
		}
		if v, _, _ := unstructured.NestedString(got.Object, "spec", "pvReclaimPolicy"); v != "Retain" {
			t.Errorf("%s: spec.pvReclaimPolicy %q, want Retain", what, v)
		}
		if got.GetName() != "basic" || got.GetNamespace() != ns || got.GetManagedFields() != nil || got.GetResourceVersion() != "" || got.GetUID() != "" {
			t.Errorf("%s: metadata %v", what, got.Object["metadata"])
		}
		_, hasStatus := got.Object["status"]
		if hasStatus != (what == "crd_tidb_cluster") {
			t.Errorf("%s: status kept %v", what, hasStatus)
		}
	}
	if v, _, _ := unstructured.NestedString(jsonObject(t, saved["manifest"]), "kind"); v != "TidbCluster" {
		t.Errorf("manifest kind %q", v)
	}
}

func jsonObject(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
