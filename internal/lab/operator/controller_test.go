package operator

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/labtls"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/testenv"
)

// waitBound bounds every wait of the integration tests; it is a deadline, not an assertion on
// how fast anything is.
const waitBound = 60 * time.Second

func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok && err == nil {
			return
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("gave up waiting for %s (last error: %v)", what, last)
}

// startOperator runs the controller against env until the test ends.
func startOperator(t *testing.T, env *testenv.Env, cfg Config) {
	t.Helper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.Scheme,
		Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&Reconciler{Client: mgr.GetClient(), Config: cfg}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// freePort returns a listener on 127.0.0.1 whose port starts a free-looking block.
func freeListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// TestOperatorRecoveryLifecycle is the restore story on a real API server: PD first, TiKV gated
// by recovery mode until the volumes-ready annotation, then restarted at restore-finish. PD is
// a real PD double in this process on the address the operator gives member pd-0.
func TestOperatorRecoveryLifecycle(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	c := env.Client

	ln := freeListener(t)
	port := ln.Addr().(*net.TCPAddr).Port
	cfg := Config{Addressing: Addressing{BasePort: port}, Image: "fedbr"}
	startOperator(t, env, cfg)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tidb"}}
	if err := c.Create(ctx, ns); err != nil {
		t.Fatal(err)
	}
	tc := &pcv1alpha1.TidbCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "tidb"},
		Spec: pcv1alpha1.TidbClusterSpec{AcrossK8s: true, RecoveryMode: true,
			PD: &pcv1alpha1.ComponentSpec{Replicas: 1},
			TiKV: &pcv1alpha1.ComponentSpec{Replicas: 3, StorageClassName: ptr.To("lab-ebs"),
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}}},
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	key := client.ObjectKeyFromObject(tc)
	exists := func(obj client.Object, name string) func() (bool, error) {
		return func() (bool, error) {
			err := c.Get(ctx, types.NamespacedName{Namespace: "tidb", Name: name}, obj)
			return err == nil, client.IgnoreNotFound(err)
		}
	}

	// PD's pod, claim and Service come first; its address is published before PD runs.
	eventually(t, "PD pod", exists(&corev1.Pod{}, "basic-pd-0"))
	eventually(t, "PD claim", exists(&corev1.PersistentVolumeClaim{}, "pd-basic-pd-0"))
	eventually(t, "PD Service", exists(&corev1.Service{}, "basic-pd"))
	wantURL := "http://127.0.0.1:" + strconv.Itoa(port)
	eventually(t, "PD client URL in status", func() (bool, error) {
		err := c.Get(ctx, key, tc)
		return tc.Status.PD.Members["basic-pd-0"].ClientURL == wantURL, err
	})

	// PD comes up; once the operator has seen it healthy, TiKV is still gated.
	pd, err := pddouble.Start(ctx, pddouble.Config{DataDir: t.TempDir(), Name: "basic-pd-0", AdvertiseURL: wantURL}, ln)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pd.Close() })
	eventually(t, "PD healthy in status", func() (bool, error) {
		err := c.Get(ctx, key, tc)
		return tc.Status.PD.Members["basic-pd-0"].Health, err
	})
	assertTiKV(t, c, 0, 0)

	// The restore marks the volumes ready (it created the claims bound to restored volumes).
	for i := range 3 {
		claim := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: PVCName("basic", ComponentTiKV, i), Namespace: "tidb",
				Labels: map[string]string{LabelInstance: "basic", LabelManagedBy: managedByValue, LabelComponent: ComponentTiKV}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}},
				VolumeName: fmt.Sprintf("restored-%d", i)},
		}
		if err := c.Create(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
	patchTC(t, c, key, func(tc *pcv1alpha1.TidbCluster) {
		tc.Annotations = map[string]string{pcv1alpha1.TiKVVolumesReadyAnnotation: "tidb/restore"}
	})
	before := map[string]types.UID{}
	eventually(t, "three TiKV pods in recovery mode", func() (bool, error) {
		pods, err := tikvPods(ctx, c)
		for _, p := range pods {
			if p.Annotations[AnnotationRecoveryMode] == "true" {
				before[p.Name] = p.UID
			}
		}
		return len(before) == 3, err
	})
	assertTiKV(t, c, 3, 3)
	var pod corev1.Pod
	if err := c.Get(ctx, types.NamespacedName{Namespace: "tidb", Name: "basic-tikv-2"}, &pod); err != nil {
		t.Fatal(err)
	}
	if got := pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName; got != "tikv-basic-tikv-2" {
		t.Errorf("tikv-2 claim = %q", got)
	}
	if len(pod.OwnerReferences) != 1 || pod.OwnerReferences[0].Name != "basic" {
		t.Errorf("tikv-2 owners = %+v", pod.OwnerReferences)
	}

	// Restore-finish, played as the agent does it: recoveryMode false and the annotation
	// removed, every TiKV pod deleted; the operator recreates them in normal mode.
	patchTC(t, c, key, func(tc *pcv1alpha1.TidbCluster) {
		tc.Spec.RecoveryMode = false
		delete(tc.Annotations, pcv1alpha1.TiKVVolumesReadyAnnotation)
	})
	pods, err := tikvPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pods {
		if err := c.Delete(ctx, &pods[i], client.GracePeriodSeconds(0)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "TiKV pods recreated in normal mode", func() (bool, error) {
		pods, err := tikvPods(ctx, c)
		restarted := 0
		for _, p := range pods {
			if p.Annotations[AnnotationRecoveryMode] == "false" && p.UID != before[p.Name] {
				restarted++
			}
		}
		return restarted == 3, err
	})
	assertTiKV(t, c, 3, 3)
}

// TestOperatorNormalStartAndScale: without recovery mode TiKV starts once PD is healthy, the
// operator provisions the claims from spec.tikv, and scale-in removes pods but keeps claims.
func TestOperatorNormalStartAndScale(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	c := env.Client
	ln := freeListener(t)
	port := ln.Addr().(*net.TCPAddr).Port
	pd, err := pddouble.Start(ctx, pddouble.Config{DataDir: t.TempDir(), Name: "basic-pd-0"}, ln)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pd.Close() })
	startOperator(t, env, Config{Addressing: Addressing{BasePort: port}, Image: "fedbr"})

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tidb"}}); err != nil {
		t.Fatal(err)
	}
	tc := &pcv1alpha1.TidbCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "tidb"},
		Spec: pcv1alpha1.TidbClusterSpec{PD: &pcv1alpha1.ComponentSpec{Replicas: 1},
			TiKV: &pcv1alpha1.ComponentSpec{Replicas: 3, StorageClassName: ptr.To("lab-ebs"),
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("3Gi")}}},
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "three TiKV pods", func() (bool, error) {
		pods, err := tikvPods(ctx, c)
		return len(pods) == 3, err
	})
	assertTiKV(t, c, 3, 3)
	var claim corev1.PersistentVolumeClaim
	if err := c.Get(ctx, types.NamespacedName{Namespace: "tidb", Name: "tikv-basic-tikv-0"}, &claim); err != nil {
		t.Fatal(err)
	}
	if got := claim.Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "3Gi" || *claim.Spec.StorageClassName != "lab-ebs" {
		t.Errorf("claim = %s of %q", got.String(), *claim.Spec.StorageClassName)
	}

	patchTC(t, c, client.ObjectKeyFromObject(tc), func(tc *pcv1alpha1.TidbCluster) { tc.Spec.TiKV.Replicas = 1 })
	eventually(t, "scale-in to one TiKV pod", func() (bool, error) {
		pods, err := tikvPods(ctx, c)
		return len(pods) == 1 && pods[0].Name == "basic-tikv-0", err
	})
	assertTiKV(t, c, 1, 3)
}

func patchTC(t *testing.T, c client.Client, key types.NamespacedName, mutate func(*pcv1alpha1.TidbCluster)) {
	t.Helper()
	tc := &pcv1alpha1.TidbCluster{}
	if err := c.Get(t.Context(), key, tc); err != nil {
		t.Fatal(err)
	}
	base := tc.DeepCopy()
	mutate(tc)
	if err := c.Patch(t.Context(), tc, client.MergeFrom(base)); err != nil {
		t.Fatal(err)
	}
}

func tikvPods(ctx context.Context, c client.Client) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := c.List(ctx, &pods, client.InNamespace("tidb"), client.MatchingLabels{LabelInstance: "basic", LabelComponent: ComponentTiKV})
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live, err
}

// assertTiKV checks the number of TiKV pods and claims now.
func assertTiKV(t *testing.T, c client.Client, pods, claims int) {
	t.Helper()
	got, err := tikvPods(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := c.List(t.Context(), &pvcs, client.InNamespace("tidb"), client.MatchingLabels{LabelInstance: "basic", LabelComponent: ComponentTiKV}); err != nil {
		t.Fatal(err)
	}
	if len(got) != pods || len(pvcs.Items) != claims {
		t.Errorf("TiKV pods = %d, claims = %d; want %d and %d", len(got), len(pvcs.Items), pods, claims)
	}
}

// TestOperatorTLSCluster: a TidbCluster with tlsCluster whose PD serves mutual TLS only: the
// operator reads PD with the cluster client secret (TiKV starts only once PD answered
// healthy), publishes PD's https:// client URL, and gives TiKV the tikv cluster secret.
func TestOperatorTLSCluster(t *testing.T) {
	env := testenv.Start(t)
	ctx := t.Context()
	c := env.Client
	set, err := labtls.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ln := freeListener(t)
	port := ln.Addr().(*net.TCPAddr).Port
	pd, err := pddouble.Start(ctx, pddouble.Config{DataDir: t.TempDir(), Name: "basic-pd-0", TLS: set.Node()}, ln)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pd.Close() })
	startOperator(t, env, Config{Addressing: Addressing{BasePort: port}, Image: "fedbr"})

	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tidb"}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ClientSecret("basic"), Namespace: "tidb"},
		Data: map[string][]byte{"ca.crt": set.CA, corev1.TLSCertKey: set.Cert, corev1.TLSPrivateKeyKey: set.Key}}); err != nil {
		t.Fatal(err)
	}
	tc := &pcv1alpha1.TidbCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "basic", Namespace: "tidb"},
		Spec: pcv1alpha1.TidbClusterSpec{PD: &pcv1alpha1.ComponentSpec{Replicas: 1}, TiKV: &pcv1alpha1.ComponentSpec{Replicas: 1},
			TLSCluster: &pcv1alpha1.TLSCluster{Enabled: true}},
	}
	if err := c.Create(ctx, tc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a TiKV pod, PD read over TLS", func() (bool, error) {
		pods, err := tikvPods(ctx, c)
		return len(pods) == 1, err
	})
	pods, err := tikvPods(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if args := strings.Join(pods[0].Spec.Containers[0].Args, " "); !strings.Contains(args, "--ca var/lib/tikv-tls/ca.crt") {
		t.Errorf("TiKV args %q: want --ca in the tikv cluster secret", args)
	}
	eventually(t, "PD's https:// client URL in the status", func() (bool, error) {
		var got pcv1alpha1.TidbCluster
		if err := c.Get(ctx, client.ObjectKeyFromObject(tc), &got); err != nil {
			return false, err
		}
		m := got.Status.PD.Members["basic-pd-0"]
		return m.Health && strings.HasPrefix(m.ClientURL, "https://"), nil
	})
}
