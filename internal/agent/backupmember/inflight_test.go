package backupmember

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/br/clean"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestDeletedWithCreateSnapshotsInFlight: the member is deleted while AWS holds its snapshot
// step's CreateSnapshots. The agent stops the step and waits its pod out (the test plays the
// kubelet: SIGTERM, the call's caller gives up; and the garbage collector: the Job goes once
// its pod is gone), then starts the clean, which the test runs with the clean engine against
// the AWS double. The finalizer stays while the call is held; AWS then runs the call (its
// snapshot exists, nothing records it), the clean deletes it, and only then is the member
// gone: the AWS double holds no snapshot of the backup, none left for the orphan sweeper.
func TestDeletedWithCreateSnapshotsInFlight(t *testing.T) {
	startAgent(t)
	ctx := context.Background()
	ns := "bk-inflight"
	lab := awsdoubletest.Serve(t, awsdouble.Options{}, "")
	inst, err := lab.Server.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}}})
	must(t, err)
	vol := inst.Volumes[0].ID
	seedClusterOn(t, ctx, ns, vol)
	c := env.Client
	m := newMember(ns, dpv1alpha1.BackupMemberExecute, fedv1alpha1.CleanPolicyDelete)
	m.Spec.BackupTS = tsText
	must(t, c.Create(ctx, m))
	key := client.ObjectKeyFromObject(m)
	eventually(t, "snapshot Job", func() (bool, string) {
		return getJob(ctx, ns, job.Name("fed-b1", job.StepSnapshot)) != nil, "no snapshot Job"
	})
	uid := string(getMember(t, ctx, key).UID)

	// The step sends its CreateSnapshots, tagged as the step tags them; AWS holds it.
	release := lab.Server.Hold("CreateSnapshots")
	t.Cleanup(release)
	stepCtx, sigterm := context.WithCancel(ctx)
	stepDone := make(chan error, 1)
	go func() {
		_, err := lab.Provider.SnapshotInstance(stepCtx, cloud.SnapshotRequest{InstanceID: inst.ID, VolumeIDs: []string{vol},
			Tags: map[string]string{meta.TagBackup: uid, meta.TagBackupPending: "c1/" + ns}})
		stepDone <- err
	}()
	eventually(t, "CreateSnapshots held by AWS", func() (bool, string) {
		n := lab.Server.Stats().InFlight["CreateSnapshots"]
		return n == 1, fmt.Sprintf("%d in flight", n)
	})

	must(t, c.Delete(ctx, getMember(t, ctx, key)))
	eventually(t, "snapshot Job deleted in the foreground", func() (bool, string) {
		j := getJob(ctx, ns, job.Name("fed-b1", job.StepSnapshot))
		return j != nil && j.DeletionTimestamp != nil, "not deleting"
	})
	// The kubelet: SIGTERM. The step's call gives up without an answer; its cleanup finds no
	// snapshot (AWS has not run the call); it reports Failed and its pod ends.
	sigterm()
	if err := <-stepDone; err == nil {
		t.Fatal("the stopped step got CreateSnapshots' answer")
	}
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepSnapshot: map[string]any{"phase": "Failed", "error": "start snapshots: context canceled"}})
	if getJob(ctx, ns, CleanJobName("fed-b1", 1)) != nil {
		t.Fatal("clean Job started while the snapshot step's pod still ran")
	}
	// The garbage collector: the pod is gone, so the Job goes.
	must(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		j := getJob(ctx, ns, job.Name("fed-b1", job.StepSnapshot))
		j.Finalizers = nil
		return c.Update(ctx, j)
	}))

	var cj = getJob(ctx, ns, CleanJobName("fed-b1", 1))
	eventually(t, "clean Job", func() (bool, string) {
		cj = getJob(ctx, ns, CleanJobName("fed-b1", 1))
		return cj != nil, "no clean Job"
	})
	a := args(cj)
	if argValue(a, "--backup-id") != uid || argValue(a, "--backup-outcome") != string(clean.Failed) {
		t.Errorf("clean args %v", a)
	}
	var expected []string
	if v := argValue(a, "--expect-volumes"); v != "" {
		expected = strings.Split(v, ",")
	}
	// The clean Job, played by the clean engine against the AWS double.
	dir, err := blob.NewDir(t.TempDir())
	must(t, err)
	settling := make(chan struct{})
	var once sync.Once
	type outcome struct {
		sum clean.Summary
		err error
	}
	cleaned := make(chan outcome, 1)
	go func() {
		sum, err := clean.Run(ctx, lab.Provider, meta.NewStore(dir, nil), clean.Options{BackupID: argValue(a, "--backup-id"),
			Outcome: clean.Outcome(argValue(a, "--backup-outcome")), Expected: expected, SettleInterval: 10 * time.Millisecond, SettleTimeout: time.Hour,
			Report: func(st clean.Status) {
				if st.Phase == clean.PhaseSettling {
					once.Do(func() { close(settling) })
				}
			}})
		cleaned <- outcome{sum, err}
	}()
	report := func(o outcome) {
		must(t, o.err)
		writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepClean: map[string]any{"phase": clean.PhaseCompleted},
			job.StepClean + ".result": o.sum})
	}
	select {
	case <-settling:
	case o := <-cleaned:
		// The clean ended while AWS still held the call: once the member is gone, AWS runs it.
		report(o)
		eventually(t, "member gone", func() (bool, string) { return getMember(t, ctx, key) == nil, "member still there" })
		release()
		eventually(t, "held call run", func() (bool, string) {
			return lab.Server.Stats().InFlight["CreateSnapshots"] == 0, "still in flight"
		})
		t.Fatalf("the member was released (clean args %v, summary %+v) while its CreateSnapshots was in flight; once AWS ran it, snapshots of the backup are left for the orphan sweeper: %v",
			a, o.sum, snapshotIDs(lab.Server, uid))
	}
	// The clean waits for the held call; the finalizer holds meanwhile, and the member says why.
	if got := getMember(t, ctx, key); got == nil || !slices.Contains(got.Finalizers, Finalizer) {
		t.Fatal("the member was released while its clean waited for the CreateSnapshots in flight")
	}
	writeReport(t, ctx, ns, "fed-b1", map[string]any{job.StepClean: map[string]any{"phase": clean.PhaseSettling, "seen": 0, "expected": 1}})
	eventually(t, "Cleaning names the wait", func() (bool, string) {
		ok, seen := condIs(getMember(t, ctx, key), dpv1alpha1.BackupMemberCleanedCondition, "False", dpv1alpha1.BackupMemberCleaningReason)
		return ok && strings.Contains(seen, "CreateSnapshots calls the stopped snapshot step may have sent"), seen
	})
	release() // AWS runs the call whose caller is gone
	o := <-cleaned
	report(o)
	if len(o.sum.Deleted) != 1 || len(o.sum.Unseen) != 0 {
		t.Errorf("clean summary %+v, want the snapshot the held call made deleted", o.sum)
	}
	eventually(t, "member gone", func() (bool, string) { return getMember(t, ctx, key) == nil, "member still there" })
	if left := snapshotIDs(lab.Server, uid); len(left) != 0 {
		t.Fatalf("snapshots of the backup left after its member is gone: %v", left)
	}
}

// snapshotIDs are the snapshots the AWS double holds tagged with backup id.
func snapshotIDs(srv *awsdouble.Server, id string) []string {
	var ids []string
	for _, s := range srv.Inventory(meta.BackupTags(id)).Snapshots {
		ids = append(ids, s.ID)
	}
	return ids
}
