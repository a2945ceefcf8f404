package sweeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/agent/sweeper"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/testenv"
)

var env *testenv.Env

// TestMain shares one API server among the tests; in -short mode only the pure ones run.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	e, err := testenv.New()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the API server:", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

func needEnv(t *testing.T) {
	t.Helper()
	if env == nil {
		t.Skip("needs a real API server; skipped in -short mode")
	}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// event is one Event the sweeper recorded.
type event struct {
	regarding string
	typ       string
	reason    string
	note      string
}

// recorder keeps the Events it is given.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) Eventf(regarding, _ runtime.Object, eventtype, reason, _, note string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := regarding.(client.Object)
	r.events = append(r.events, event{regarding: o.GetNamespace() + "/" + o.GetName() + "/" + string(o.GetUID()), typ: eventtype, reason: reason, note: fmt.Sprintf(note, args...)})
}

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// world is one test's AWS double, namespace and sweeper.
type world struct {
	lab      awsdoubletest.Lab
	ec2      *ec2.Client // no retries: a dropped answer is an error to the caller
	instance awsdouble.InstanceInfo
	owner    meta.Owner
	ns       string
	pod      *corev1.Pod
	rec      *recorder
	metrics  *metrics.Metrics
	sweeper  *sweeper.Sweeper
}

func newWorld(t *testing.T, ns string) *world {
	t.Helper()
	ctx := testCtx(t)
	w := &world{lab: awsdoubletest.Serve(t, awsdouble.Options{Unlimited: true}, ""), ns: ns, rec: &recorder{}, metrics: metrics.New()}
	ac, err := aws.LoadConfig(ctx, awsdouble.Config(w.lab.Server.Options().Region), w.lab.Server.Options().Region)
	must(t, err)
	w.ec2 = ec2.NewFromConfig(ac, func(o *ec2.Options) {
		o.BaseEndpoint = awssdk.String(w.lab.Endpoint)
		o.RetryMaxAttempts = 1
	})
	w.instance, err = w.lab.Server.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{
		{Device: "/dev/xvdb", SizeGiB: 1}, {Device: "/dev/xvdc", SizeGiB: 1}}})
	must(t, err)
	must(t, env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	cluster, err := sweeper.ClusterID(ctx, env.Client)
	must(t, err)
	w.owner = meta.Owner{Cluster: cluster, Namespace: ns}
	w.pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fedbr-agent-0", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "fedbr:test"}}}}
	must(t, env.Client.Create(ctx, w.pod))
	w.sweeper = &sweeper.Sweeper{Cloud: w.lab.Provider, Reader: env.Client, Recorder: w.rec, Metrics: w.metrics,
		Scope: sweeper.Scope{Cluster: cluster}, Interval: 50 * time.Millisecond, Grace: time.Hour,
		Pod: ktypes.NamespacedName{Namespace: ns, Name: w.pod.Name}, Now: w.lab.Server.Now, Log: testr.New(t)}
	return w
}

// snapshot starts one snapshot set of the instance's first data volume tagged as the snapshot
// step tags it for backup id (pending, with owner), plus extra; with lost, the double runs
// the CreateSnapshots but the caller never hears the answer.
func (w *world) snapshot(t *testing.T, backupID string, owner *meta.Owner, lost bool, extra map[string]string) string {
	t.Helper()
	ctx := testCtx(t)
	tags := map[string]string{meta.TagBackup: backupID, "fedbr.io/store": "1"}
	for k, v := range meta.PendingBackupTags(owner) {
		tags[k] = v
	}
	for k, v := range extra {
		tags[k] = v
	}
	before := w.inventory(t, tags)
	var ts []types.Tag
	for k, v := range tags {
		ts = append(ts, types.Tag{Key: awssdk.String(k), Value: awssdk.String(v)})
	}
	if lost {
		w.lab.Server.SetFaults(awsdouble.Faults{DropResponses: map[string]int{"CreateSnapshots": 1}})
		defer w.lab.Server.SetFaults(awsdouble.Faults{})
	}
	_, err := w.ec2.CreateSnapshots(ctx, &ec2.CreateSnapshotsInput{
		InstanceSpecification: &types.InstanceSpecification{InstanceId: awssdk.String(w.instance.ID), ExcludeBootVolume: awssdk.Bool(true),
			ExcludeDataVolumeIds: []string{w.instance.Volumes[1].ID}},
		CopyTagsFromSource: types.CopyTagsFromSourceVolume,
		TagSpecifications:  []types.TagSpecification{{ResourceType: types.ResourceTypeSnapshot, Tags: ts}},
	})
	if lost != (err != nil) {
		t.Fatalf("CreateSnapshots (answer lost: %v): %v", lost, err)
	}
	after := w.inventory(t, tags)
	for _, id := range after {
		if !slices.Contains(before, id) {
			return id
		}
	}
	t.Fatalf("no new snapshot tagged %v", tags)
	return ""
}

// volume creates an available volume tagged as restore-volumes tags it for restore id.
func (w *world) volume(t *testing.T, restoreID string, owner *meta.Owner) string {
	t.Helper()
	tags := meta.RestoreTags(restoreID)
	for k, v := range meta.PendingRestoreTags(owner) {
		tags[k] = v
	}
	v, err := w.lab.Provider.CreateVolume(testCtx(t), cloud.VolumeSpec{AZ: w.instance.AZ, Tags: tags,
		SnapshotID: w.snapshot(t, "source-"+restoreID, nil, false, nil)})
	must(t, err)
	_, err = w.lab.Provider.WaitVolumes(testCtx(t), []string{v.ID})
	must(t, err)
	return v.ID
}

// inventory lists the ids of the snapshots carrying all tags.
func (w *world) inventory(t *testing.T, tags map[string]string) []string {
	t.Helper()
	var ids []string
	for _, s := range w.lab.Server.Inventory(tags).Snapshots {
		ids = append(ids, s.ID)
	}
	return ids
}

// exists says which of ids the double still has.
func (w *world) exists(ids ...string) map[string]bool {
	inv := w.lab.Server.Inventory(nil)
	out := map[string]bool{}
	for _, id := range ids {
		out[id] = slices.ContainsFunc(inv.Snapshots, func(i awsdouble.InventoryItem) bool { return i.ID == id }) ||
			slices.ContainsFunc(inv.Volumes, func(i awsdouble.InventoryItem) bool { return i.ID == id })
	}
	return out
}

func backupMember(ns, name string) *dpv1alpha1.VolumeBackupMember {
	return &dpv1alpha1.VolumeBackupMember{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "b1", K8sClusterName: "az1", TCName: "basic", TCNamespace: ns,
			Phase: dpv1alpha1.BackupMemberExecute, Template: fedv1alpha1.VolumeBackupMemberSpec{
				StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}}},
	}
}

// TestSweepDeletesOrphansAfterGrace: snapshots and a volume made for members that no longer
// exist — one snapshot by a CreateSnapshots whose answer was lost — are kept while young and
// deleted by the running sweeper once past the grace period, each with an Event on the agent's
// Pod and a count; what a live member owns or records, what is not marked pending (a completed
// backup), what another cluster made and a volume a PV names are never deleted.
func TestSweepDeletesOrphansAfterGrace(t *testing.T) {
	needEnv(t)
	ctx := testCtx(t)
	w := newWorld(t, "sweep-grace")
	live := backupMember(w.ns, "fed-live")
	must(t, env.Client.Create(ctx, live))
	other := meta.Owner{Cluster: "another-clusters-uid", Namespace: w.ns}

	orphanLost := w.snapshot(t, "uid-gone", &w.owner, true, nil)
	orphan := w.snapshot(t, "uid-gone", &w.owner, false, nil)
	ofLive := w.snapshot(t, string(live.UID), &w.owner, false, nil)
	completed := w.snapshot(t, "uid-retained", nil, false, nil) // a completed backup, kept by cleanPolicy Retain
	ofOther := w.snapshot(t, "uid-gone", &other, false, nil)
	recorded := w.snapshot(t, "uid-gone-2", &w.owner, false, nil)
	orphanVol := w.volume(t, "ruid-gone", &w.owner)
	boundVol := w.volume(t, "ruid-gone-2", &w.owner)

	// The live member's result records the snapshot of another (gone) backup.
	res, err := json.Marshal(map[string]any{"snapshots": []map[string]any{{"storeID": 1, "snapshotID": recorded}}})
	must(t, err)
	live.Status.Steps = []dpv1alpha1.StepReport{{Name: dpv1alpha1.StepSnapshot, Phase: "Completed", Result: &runtime.RawExtension{Raw: res}}}
	must(t, env.Client.Status().Update(ctx, live))
	must(t, env.Client.Create(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "fedbr-ruid-gone-2-" + w.ns + "-tikv-0"},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: boundVol}}}}))
	all := []string{orphanLost, orphan, ofLive, completed, ofOther, recorded, orphanVol, boundVol}

	p, err := w.sweeper.Sweep(ctx)
	must(t, err)
	if len(p.Delete) != 0 {
		t.Fatalf("young orphans deleted: %+v", p.Delete)
	}
	for id, ok := range w.exists(all...) {
		if !ok {
			t.Fatalf("%s is gone before the grace period", id)
		}
	}

	w.lab.Server.Advance(2 * time.Hour)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.sweeper.Start(runCtx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		e := w.exists(orphanLost, orphan, orphanVol)
		if !e[orphanLost] && !e[orphan] && !e[orphanVol] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphans still there: %v", e)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a few more sweeps: none deletes anything else
	stop()
	must(t, <-done)

	for id, ok := range w.exists(ofLive, completed, ofOther, recorded, boundVol) {
		if !ok {
			t.Errorf("%s was deleted; it is not an orphan", id)
		}
	}
	if got := testutil.ToFloat64(w.metrics.OrphansDeleted.WithLabelValues(metrics.OrphanSnapshot)); got != 2 {
		t.Errorf("%v snapshots counted deleted, want 2", got)
	}
	if got := testutil.ToFloat64(w.metrics.OrphansDeleted.WithLabelValues(metrics.OrphanVolume)); got != 1 {
		t.Errorf("%v volumes counted deleted, want 1", got)
	}
	if got := testutil.ToFloat64(w.metrics.OrphanSweepErrors); got != 0 {
		t.Errorf("%v sweep errors", got)
	}
	events := w.rec.all()
	if len(events) != 3 {
		t.Fatalf("events %+v, want one per deletion", events)
	}
	for _, e := range events {
		if e.regarding != w.ns+"/fedbr-agent-0/"+string(w.pod.UID) || e.typ != corev1.EventTypeNormal || e.reason != "OrphanDeleted" {
			t.Errorf("event %+v", e)
		}
		if !strings.Contains(e.note, "no longer exists") {
			t.Errorf("event note %q does not say why", e.note)
		}
	}
}

// TestSweepDeletesNothingWhenMembersCannotBeListed: when the members cannot be listed the
// sweep gives up before deleting anything, and counts the failure.
func TestSweepDeletesNothingWhenMembersCannotBeListed(t *testing.T) {
	needEnv(t)
	ctx := testCtx(t)
	w := newWorld(t, "sweep-nolist")
	orphan := w.snapshot(t, "uid-gone", &w.owner, false, nil)
	w.lab.Server.Advance(2 * time.Hour)
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.Scheme})
	must(t, err)
	w.sweeper.Reader = interceptor.NewClient(base, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*dpv1alpha1.VolumeRestoreMemberList); ok {
				return errors.New("injected: the API server is unavailable")
			}
			return c.List(ctx, list, opts...)
		}})
	p, err := w.sweeper.Sweep(ctx)
	if err == nil || !strings.Contains(err.Error(), "list VolumeRestoreMembers") {
		t.Fatalf("sweep = %+v, %v; want the listing's error", p, err)
	}
	if !w.exists(orphan)[orphan] {
		t.Fatal("the orphan was deleted although the members could not be listed")
	}
	if got := testutil.ToFloat64(w.metrics.OrphanSweepErrors); got != 1 {
		t.Errorf("%v sweep errors counted, want 1", got)
	}
}

// TestSweepReadsTheMembersInPages: the members are read a page at a time, and every page
// counts: the snapshots of live members beyond the first page are kept, only the orphan goes.
func TestSweepReadsTheMembersInPages(t *testing.T) {
	needEnv(t)
	ctx := testCtx(t)
	w := newWorld(t, "sweep-pages")
	var live []string
	for i := range 5 {
		m := backupMember(w.ns, fmt.Sprintf("fed-live-%d", i))
		must(t, env.Client.Create(ctx, m))
		live = append(live, w.snapshot(t, string(m.UID), &w.owner, false, nil))
	}
	orphan := w.snapshot(t, "uid-gone", &w.owner, false, nil)
	w.lab.Server.Advance(2 * time.Hour)
	base, err := client.NewWithWatch(env.Config, client.Options{Scheme: scheme.Scheme})
	must(t, err)
	var mu sync.Mutex
	var limits []int64
	w.sweeper.PageSize = 2
	w.sweeper.Reader = interceptor.NewClient(base, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*dpv1alpha1.VolumeBackupMemberList); ok {
				lo := (&client.ListOptions{}).ApplyOptions(opts)
				mu.Lock()
				limits = append(limits, lo.Limit)
				mu.Unlock()
			}
			return c.List(ctx, list, opts...)
		}})
	p, err := w.sweeper.Sweep(ctx)
	must(t, err)
	if len(p.Delete) != 1 || p.Delete[0].ID != orphan {
		t.Fatalf("deleted %+v, want only the orphan %s", p.Delete, orphan)
	}
	for id, ok := range w.exists(live...) {
		if !ok {
			t.Errorf("%s, a live member's snapshot, was deleted", id)
		}
	}
	if len(limits) != 3 || slices.ContainsFunc(limits, func(l int64) bool { return l != 2 }) {
		t.Errorf("backup members listed with limits %v, want 3 pages of at most 2", limits)
	}
}

// TestClusterID: the cluster's id is its kube-system namespace's uid.
func TestClusterID(t *testing.T) {
	needEnv(t)
	ctx := testCtx(t)
	ns := &corev1.Namespace{}
	must(t, env.Client.Get(ctx, ktypes.NamespacedName{Name: "kube-system"}, ns))
	id, err := sweeper.ClusterID(ctx, env.Client)
	if err != nil || id != string(ns.UID) || id == "" {
		t.Fatalf("ClusterID = %q, %v; want %q", id, err, ns.UID)
	}
}
