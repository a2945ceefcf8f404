package plane

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/testenv"
)

// paddedMembers is how many members of each kind TestPaddedMembersKeepTheCacheSmall pads.
const paddedMembers = 12

// keptPerMember bounds what a plane's cache keeps of one member however it is padded, from what
// trim.go keeps, the strings at their bounds:
//
//	backup member: name 253 + namespace 63 + uid 36 + resourceVersion ≈20 + three owner labels
//	(keys ≈35, values ≤63) ≈300 + the phase-since annotation ≈65; spec phase and backupTS ≈30;
//	status phase 64 + commitTs 32 + backupPath 8,192; conditions Failed and Cleaned with reason
//	1,024 and message 32,768 each = 67,584, Complete and GCResumed ≈40; the pause and snapshot
//	steps' names and phases ≈80: ≈76.9 KiB of strings
//	restore member: the same metadata ≈0.8 KiB; status phase 64 + commitTs 32; conditions Failed
//	and WarmUpComplete 67,584, four others ≈70: ≈67 KiB of strings
//
// plus what holds them: the member struct (≈1.5 KiB), its two maps, the condition and step
// slices and the cache's index entry, under 4 KiB. 80.9 KiB at most, and 96 KiB leaves room for
// the allocator's size classes.
const keptPerMember = 96 << 10

// cacheOverhead is what a plane's cache costs besides the members it holds: two informers and
// the client (measured at about 0.5 MiB with no member), and each informer's watch decoding,
// whose buffers are kept for as long as the watch runs and grow to the largest object it decoded
// (at most what the API server stores, about 1.5 MiB), by doubling: up to about 6 MiB each. So 4 MiB +
// 2 × 6 MiB: it depends on the largest member, not on how many there are. (The split is not
// measured: the cache over the padded members holds about 8.5 MiB more than their arithmetic.)
const cacheOverhead = 16 << 20

// TestPaddedMembersKeepTheCacheSmall pads 12 backup and 12 restore members to what the API server
// stores (about 1 MiB each: every string the CRD bounds at its bound, the schemaless backup and
// result of several steps, status.tikvVolumes, 16 conditions, labels, annotations, finalizers,
// managedFields), runs a data plane's cache over them as the manager builds it (newPlane), and
// checks that the heap it holds once synced stays under 24 × keptPerMember + cacheOverhead
// (18.25 MiB; measured 10.9 MiB). The negative control runs a cache without the trim over the
// same members: it holds more than the bound (measured 39.6 MiB), so the bound tells the two
// apart.
func TestPaddedMembersKeepTheCacheSmall(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	env := testenv.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, dpv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	sizes := createPadded(ctx, t, env.Client, paddedMembers)
	t.Logf("padded members as the API server returns them (JSON, with managedFields): %v bytes", sizes)

	bound := uint64(2*paddedMembers*keptPerMember + cacheOverhead)
	// What the cache costs with nothing in it, for the record: the same options over a namespace
	// without members.
	empty := cacheHeap(ctx, t, "empty", 0, func() (cluster.Cluster, error) {
		return cluster.New(env.Config, func(co *cluster.Options) {
			co.Scheme, co.Cache = scheme, CacheOptions(scheme)
			co.Cache.DefaultNamespaces = map[string]cache.Config{"empty": {}}
		})
	})
	trimmed := cacheHeap(ctx, t, "default", paddedMembers, func() (cluster.Cluster, error) {
		p, err := newPlane("padded", env.Config, Options{Scheme: scheme, Log: logr.Discard()})
		if err != nil {
			return nil, err
		}
		return p.Cluster, nil
	})
	whole := cacheHeap(ctx, t, "default", paddedMembers, func() (cluster.Cluster, error) {
		return cluster.New(env.Config, func(co *cluster.Options) { co.Scheme = scheme })
	})
	t.Logf("heap held by the cache over %d padded members: %.2f MiB trimmed, %.2f MiB whole; bound %.2f MiB; with no member %.2f MiB",
		2*paddedMembers, mib(trimmed), mib(whole), mib(bound), mib(empty))
	if trimmed > bound {
		t.Errorf("the plane's cache holds %.2f MiB over %d padded members, more than the %.2f MiB bound", mib(trimmed), 2*paddedMembers, mib(bound))
	}
	if whole <= bound {
		t.Errorf("negative control: a cache without the trim holds %.2f MiB over the same members, within the %.2f MiB bound: the bound does not tell them apart",
			mib(whole), mib(bound))
	}
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// heapNow is the live heap after a full collection.
func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// cacheHeap starts the cluster newCluster builds, syncs its cache of both member kinds (want of
// each in namespace), and
// returns how much the live heap grew from before the cluster was built to after the sync (0 if
// it shrank). The cluster is stopped before it returns.
func cacheHeap(ctx context.Context, t *testing.T, namespace string, want int, newCluster func() (cluster.Cluster, error)) uint64 {
	t.Helper()
	before := heapNow()
	c, err := newCluster()
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Start(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("cache: %v", err)
		}
	}()
	if !c.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("the cache did not start")
	}
	for _, list := range []client.ObjectList{&dpv1alpha1.VolumeBackupMemberList{}, &dpv1alpha1.VolumeRestoreMemberList{}} {
		// The first List starts the kind's informer and waits for its sync.
		if err := c.GetCache().List(ctx, list, client.InNamespace(namespace)); err != nil {
			t.Fatal(err)
		}
		if n := len(listItems(list)); n != want {
			t.Fatalf("the cache holds %d %T items, want %d", n, list, want)
		}
	}
	after := heapNow()
	runtime.KeepAlive(c)
	if after < before {
		return 0
	}
	return after - before
}

func listItems(l client.ObjectList) []any {
	var out []any
	switch l := l.(type) {
	case *dpv1alpha1.VolumeBackupMemberList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *dpv1alpha1.VolumeRestoreMemberList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out
}

// createPadded creates n padded members of each kind in namespace default and returns their
// sizes as stored.
func createPadded(ctx context.Context, t *testing.T, c client.Client, n int) []int {
	t.Helper()
	var sizes []int
	for i := range n {
		for _, m := range []client.Object{paddedBackupMember(i), paddedRestoreMember(i)} {
			status := statusOf(m)
			if err := c.Create(ctx, m); err != nil {
				t.Fatalf("creating padded %T: %v", m, err)
			}
			setStatus(m, status)
			if err := c.Status().Update(ctx, m); err != nil {
				t.Fatalf("padding %T's status: %v", m, err)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if len(raw) < 1<<20 {
				t.Fatalf("padded %T is %d bytes as stored, want at least 1 MiB", m, len(raw))
			}
			sizes = append(sizes, len(raw))
		}
	}
	return sizes
}

func statusOf(m client.Object) any {
	switch m := m.(type) {
	case *dpv1alpha1.VolumeBackupMember:
		return m.Status
	case *dpv1alpha1.VolumeRestoreMember:
		return m.Status
	}
	return nil
}

func setStatus(m client.Object, st any) {
	switch m := m.(type) {
	case *dpv1alpha1.VolumeBackupMember:
		m.Status = st.(dpv1alpha1.VolumeBackupMemberStatus)
	case *dpv1alpha1.VolumeRestoreMember:
		m.Status = st.(dpv1alpha1.VolumeRestoreMemberStatus)
	}
}

func pad(c byte, n int) string { return strings.Repeat(string(c), n) }

// paddedMeta is metadata at its bounds: a 245-byte name, owner labels of 63 bytes, 100 labels
// more, a phase-since annotation with 16 KiB of fraction digits (a valid RFC 3339 time), a 64 KiB
// annotation, and 32 finalizers.
func paddedMeta(kind string, i int) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%03d", kind, pad('n', 240-len(kind)), i), Namespace: "default",
		Labels: map[string]string{dpv1alpha1.LabelOwnerName: pad('o', 63), dpv1alpha1.LabelOwnerNamespace: pad('s', 63), dpv1alpha1.LabelOwnerUID: pad('u', 63)},
		Annotations: map[string]string{
			dpv1alpha1.AnnotationPhaseSince: "2026-12-06T12:00:00." + pad('0', 16<<10) + "1Z",
			"pad.fedbr.io/annotation":       pad('a', 64<<10),
		}}
	for j := range 100 {
		m.Labels[fmt.Sprintf("pad.fedbr.io/l-%03d", j)] = pad('l', 63)
	}
	for j := range 32 {
		m.Finalizers = append(m.Finalizers, fmt.Sprintf("pad.fedbr.io/f-%02d-%s", j, pad('f', 50)))
	}
	return m
}

// paddedConditions are 16 conditions (the CRD's most), those of types named in full at the CRD's
// bounds (a reason of 1,024 bytes, a message of 32 KiB), the others with 8 KiB messages.
func paddedConditions(full []string, others []string) []metav1.Condition {
	at := metav1.NewTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	var cs []metav1.Condition
	for _, t := range full {
		cs = append(cs, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: "R" + pad('r', 1023), Message: pad('m', 32768), LastTransitionTime: at})
	}
	for j := 0; len(cs) < 16; j++ {
		t := fmt.Sprintf("Pad%d", j)
		if j < len(others) {
			t = others[j]
		}
		cs = append(cs, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: "R" + pad('r', 1023), Message: pad('m', 8<<10), LastTransitionTime: at})
	}
	return cs
}

// rawPad is a schemaless report of about n bytes.
func rawPad(n int) *k8sruntime.RawExtension {
	return &k8sruntime.RawExtension{Raw: []byte(`{"pad":"` + pad('p', n) + `"}`)}
}

// paddedStep is a step's report with its error at its bound and, when full, every field set, its
// strings and lists at their bounds and its schemaless backup and result of schemaless bytes each.
func paddedStep(name string, full bool, schemaless int) dpv1alpha1.StepReport {
	now := metav1.NewMicroTime(time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC))
	s := dpv1alpha1.StepReport{Name: name, Phase: pad('P', 32), Error: pad('e', dpv1alpha1.MaxStepError), BackupTS: 1000, ResolvedTS: 1000,
		Since: &now, GCPausedAt: &now, LiftedAt: &now, ReadyAt: &now, BackupTSAt: &now, StartedAt: &now, CompletedAt: &now,
		ServiceSafePoint: pad('s', 128)}
	if !full {
		return dpv1alpha1.StepReport{Name: name, Phase: s.Phase, Error: s.Error}
	}
	for j := range 64 {
		s.PausedSchedulers = append(s.PausedSchedulers, fmt.Sprintf("%03d%s", j, pad('d', 125)))
	}
	for j := range 16 {
		s.ScheduleConfig = append(s.ScheduleConfig, dpv1alpha1.ScheduleConfigItem{Key: fmt.Sprintf("schedule.%03d%s", j, pad('k', 100)), Original: pad('o', 1024), Paused: pad('p', 1024)})
	}
	s.Backup, s.Result = rawPad(schemaless), rawPad(schemaless)
	return s
}

func paddedBackupMember(i int) *dpv1alpha1.VolumeBackupMember {
	m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: paddedMeta("backup", i),
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: pad('b', 253), K8sClusterName: pad('k', 253), TCName: pad('t', 4096), TCNamespace: pad('n', 63),
			Phase: dpv1alpha1.BackupMemberExecute, BackupTS: "12345678901234567890", StartPause: true, ResumeGC: true,
			Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{
				Provider: "aws", Bucket: pad('b', 255), Prefix: pad('p', 1024)}}}}}
	for j := range 128 {
		m.Spec.Template.Env = append(m.Spec.Template.Env, corev1.EnvVar{Name: fmt.Sprintf("PAD_%03d", j), Value: pad('v', 256)})
	}
	m.Status = dpv1alpha1.VolumeBackupMemberStatus{Phase: pad('P', MaxMemberPhase), BackupPath: pad('b', MaxMemberBackupPath), CommitTs: pad('1', MaxMemberCommitTs),
		BackupSize: 1, IncrementalBackupSize: 1, SnapshotsTotal: 1, SnapshotsCompleted: 1, CleanAttempts: 1,
		Conditions: paddedConditions([]string{dpv1alpha1.BackupMemberFailedCondition, dpv1alpha1.BackupMemberCleanedCondition,
			dpv1alpha1.BackupMemberCompleteCondition, dpv1alpha1.BackupMemberGCResumedCondition},
			[]string{dpv1alpha1.BackupMemberInitializedCondition, dpv1alpha1.BackupMemberArmedCondition, dpv1alpha1.BackupMemberSnapshotsCreatedCondition, dpv1alpha1.BackupMemberSizedCondition}),
		Steps: []dpv1alpha1.StepReport{paddedStep(dpv1alpha1.StepPause, true, 64<<10), paddedStep(dpv1alpha1.StepSnapshot, true, 96<<10)}}
	for j := range 2000 {
		m.Status.TiKVVolumes = append(m.Status.TiKVVolumes, fmt.Sprintf("vol-%04d%s", j, pad('v', 56)))
	}
	for j := range 32 {
		m.Status.Steps = append(m.Status.Steps, paddedStep(fmt.Sprintf("other-%02d", j), false, 0))
	}
	return m
}

func paddedRestoreMember(i int) *dpv1alpha1.VolumeRestoreMember {
	m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: paddedMeta("restore", i),
		Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: pad('r', 253), K8sClusterName: pad('k', 253), TCName: pad('t', 4096), TCNamespace: pad('n', 63),
			AZName: pad('z', 1024), Phase: dpv1alpha1.RestoreMemberRestoreData, DataMember: true, ResolvedTS: "99999999999999999999",
			Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: pad('b', 255), Prefix: pad('p', 1024),
				Path: pad('q', 1024)}}}}
	for j := range 128 {
		m.Spec.Template.Env = append(m.Spec.Template.Env, corev1.EnvVar{Name: fmt.Sprintf("PAD_%03d", j), Value: pad('v', 256)})
	}
	m.Status = dpv1alpha1.VolumeRestoreMemberStatus{Phase: pad('P', MaxMemberPhase), CommitTs: pad('1', MaxMemberCommitTs), RestoredTS: pad('2', 20), VolumesTotal: 1, VolumesReady: 1,
		Conditions: paddedConditions([]string{dpv1alpha1.RestoreMemberFailedCondition, dpv1alpha1.RestoreMemberWarmUpCompleteCondition,
			dpv1alpha1.RestoreMemberWarmUpStartedCondition, dpv1alpha1.RestoreMemberTikvCompleteCondition, dpv1alpha1.RestoreMemberDataCompleteCondition,
			dpv1alpha1.RestoreMemberCompleteCondition, dpv1alpha1.RestoreMemberCheckedCondition},
			[]string{dpv1alpha1.RestoreMemberTargetCheckedCondition, dpv1alpha1.RestoreMemberVolumeCompleteCondition, dpv1alpha1.RestoreMemberVolumesCleanedCondition}),
		Steps: []dpv1alpha1.StepReport{paddedStep(dpv1alpha1.StepRestoreVolumes, true, 192<<10), paddedStep(dpv1alpha1.StepRestoreData, true, 64<<10)}}
	for j := range 24 {
		m.Status.Steps = append(m.Status.Steps, paddedStep(fmt.Sprintf("%s-%d", dpv1alpha1.StepWarmup, j), false, 0))
	}
	return m
}
