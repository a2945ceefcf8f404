// Package e2e runs fedbr's main job end to end in the lab — the same code path as `make demo`
// (internal/lab/demo) — and asserts what the issue promises: the backup and the restore
// complete, the restored cluster holds exactly the transactions committed at or before the
// backup's commit ts, the live cluster holds no pause afterwards, and deleting the backup leaves
// no snapshot and no unused volume behind.
package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/demo"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/lab/labtest"
)

// The e2e runs (variants): each needs a lab of its own, since its source cluster differs (TLS,
// raft volumes) or its install does (the privileged warm-up of fio). `make test` runs
// ciVariants of them, picked by the seed (labtest.Slice); `make test-long` runs all.
const (
	variantSync  = "warmup=sync"
	variantAsync = "warmup=async"
	variantFio   = "raft-volumes,warmup=fio,install"
	variantTLS   = "check-wal-only,tls"
	ciVariants   = 1
)

var variants = []string{variantSync, variantAsync, variantFio, variantTLS}

var (
	pickOnce sync.Once
	picked   []string
)

// inSlice skips the test unless its variant is in this run's slice.
func inSlice(t *testing.T, variant string) {
	t.Helper()
	pickOnce.Do(func() { picked = labtest.Slice(t, "test/e2e", variants, ciVariants) })
	if !slices.Contains(picked, variant) {
		t.Skipf("not in this run's slice of the e2e runs (%v); make test-long runs every one", picked)
	}
}

// TestFederatedBackupAndRestoreInTheLab runs the main job once per warm-up mode, each in its own
// lab (the benchmark restores without warm-up), and once with two volumes per TiKV (data, and
// the raft log apart), which the backup must capture in one CreateSnapshots call per instance
// and the restore must bring back to the right claims; that run warms up with fio, which reads
// every block of both volumes through the devices the lab's nodes show privileged pods. Every
// run installs fedbr through its charts (demo.Options.Install), as `make demo` does: the manager
// and the agents run as the charts' Deployments in fedbr-system under the restricted Pod
// Security Standard, with the charts' RBAC. (The benchmark starts them as processes, so that its
// numbers compare with the earlier runs recorded in docs/federation.md.)
func TestFederatedBackupAndRestoreInTheLab(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four Kubernetes clusters and a TiDB double; skipped in -short mode")
	}
	for _, mode := range []fedv1alpha1.RestoreWarmupMode{fedv1alpha1.RestoreWarmupSync, fedv1alpha1.RestoreWarmupAsync} {
		t.Run("warmup="+string(mode), func(t *testing.T) {
			inSlice(t, "warmup="+string(mode))
			// The async run restores as a drill does: a scratch restore, its TidbClusters made by
			// the agents from the ones the backup saved, its user check the bank checker.
			backupAndRestore(t, demo.Options{RestoreWarmup: mode, Install: true, RestoreUserCheck: true, RestoreScratch: mode == fedv1alpha1.RestoreWarmupAsync})
		})
	}
	// fio reads every volume's device, the raft volumes' too: the agents, installed through the
	// charts with policy.privilegedWarmup, allow the privileged warm-up pods, and the lab's nodes
	// show those pods a device per volume.
	t.Run(variantFio, func(t *testing.T) {
		inSlice(t, variantFio)
		backupAndRestore(t, demo.Options{RaftVolumes: true, RestoreWarmup: fedv1alpha1.RestoreWarmupSync, RestoreWarmupStrategy: fedv1alpha1.RestoreWarmupStrategyFio, Install: true,
			RestoreUserCheck: true})
	})
}

// TestCheckWALOnlyRestoreOverTLSInTheLab runs the main job once for two things, so CI runs
// no extra lab for either:
//
//   - warmupStrategy check-wal-only (and warmup async, which check-wal-only runs before TiKV
//     all the same): one warm-up Job per TiKV member verifies the RocksDB logs of its data
//     volume, reads nothing else, and TiKV is handed the volumes only after every Job passed.
//     The lab's TiKV double keeps its own log format (raft.log, kv.ckpt), not RocksDB's
//     numbered logs, so the check finds no log to verify here: this shows the Jobs, their order
//     and the restore's outcome, not the verifier on real logs (internal/warmup's tests do that).
//   - TLS (demo.Options.TLS): both TiDB clusters have spec.tlsCluster enabled, PD and TiKV serve
//     mutual TLS only, and every pause, snapshot, restore-volumes and restore-data pod dialed
//     them with --ca, --cert and --key from the cluster client secret the agent mounted.
//
// fedbr is installed through its charts, as in every e2e run.
func TestCheckWALOnlyRestoreOverTLSInTheLab(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four Kubernetes clusters and a TiDB double; skipped in -short mode")
	}
	inSlice(t, variantTLS)
	backupAndRestore(t, demo.Options{RestoreWarmup: fedv1alpha1.RestoreWarmupAsync, RestoreWarmupStrategy: fedv1alpha1.RestoreWarmupStrategyCheckWALOnly, TLS: true, Install: true})
}

func backupAndRestore(t *testing.T, o demo.Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	l := labtest.Up(ctx, t)
	o.Lab, o.Out = l, labtest.Log{T: t}
	warmup, raftVolumes := o.RestoreWarmup, o.RaftVolumes
	r, err := demo.Run(ctx, o)
	if r != nil {
		var b strings.Builder
		r.Print(&b, demo.PrintOptions{Instrumentation: true})
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatalf("demo: %v", err)
	}
	if r.Backup == nil || r.Backup.Status.Phase != fedv1alpha1.VolumeBackupComplete {
		t.Errorf("backup not complete: %+v", r.Backup)
	}
	if r.Restore == nil || r.Restore.Status.Phase != fedv1alpha1.VolumeRestoreComplete {
		t.Errorf("restore not complete: %+v", r.Restore)
	}
	if r.Checker != "pass" {
		t.Errorf("checker: %s", r.Checker)
	}
	// The checker judged the backup's commit ts, which the restore restored to; and the workload
	// wrote enough on both sides of it, or the checker could not tell a restore that flashed back
	// from one that did not, nor one that flashed back too far (the checker refuses such a ts;
	// this says so by name).
	if r.Backup != nil && r.Restore != nil {
		if r.Restore.Status.CommitTs != r.Backup.Status.CommitTs || r.Backup.Status.CommitTs != fmt.Sprint(r.CheckedTS) {
			t.Errorf("checked ts %d, backup commit ts %q, restore commit ts %q: want all the same", r.CheckedTS, r.Backup.Status.CommitTs, r.Restore.Status.CommitTs)
		}
	}
	if r.TxnsBeforeCommitTS < bank.MinTransfers || r.TxnsAfterCommitTS < bank.MinTransfers {
		t.Errorf("%d transfers committed at or before the backup's commit ts and %d after it, want at least %d on each side",
			r.TxnsBeforeCommitTS, r.TxnsAfterCommitTS, bank.MinTransfers)
	}
	volumes := 1
	if raftVolumes {
		volumes = 2
	}
	if want := 3 * len(l.DataPlanes) * volumes; r.Snapshots != want {
		t.Errorf("snapshots = %d, want %d (one per TiKV volume)", r.Snapshots, want)
	}
	if r.SelfReported != len(l.DataPlanes) {
		t.Errorf("%d of %d snapshot steps stamped their start and completion into their members", r.SelfReported, len(l.DataPlanes))
	}
	if r.SlowestCreateSnapshots <= 0 {
		t.Errorf("no CreateSnapshots call was timed: the pause window has no floor to compare with")
	}
	if r.HeldAfterBackup.Any() {
		t.Errorf("the source cluster still holds %+v after the backup", r.HeldAfterBackup)
	}
	// The first backup of these volumes: every block is new, so incremental = full, and both
	// are the bank's written data (blocks), not the volumes' capacity.
	if r.BackupSize <= 0 || r.IncrementalBackupSize != r.BackupSize || r.BackupSize >= int64(r.Snapshots)<<30 {
		t.Errorf("sizes full %d incremental %d: want the same, > 0 and below the volumes' capacity", r.BackupSize, r.IncrementalBackupSize)
	}
	// The overheads are measured, not asserted (a noisy machine); every time they need must be there.
	if _, ok := r.BackupOverhead(); !ok {
		t.Errorf("backup overhead not computable from %+v", r.BackupWork)
	}
	if _, ok := r.RestoreOverhead(); !ok {
		t.Errorf("restore overhead not computable from %+v", r.RestoreWork)
	}
	if warmup != fedv1alpha1.RestoreWarmupNone {
		checkWarmup(t, l, r, o)
	}
	checkStepTLS(t, r, o.TLS)
	if r.OrphanSnapshots != 0 || r.OrphanVolumes != 0 {
		t.Errorf("left behind: %d snapshots, %d volumes", r.OrphanSnapshots, r.OrphanVolumes)
	}
	checkDescribed(t, l, r)
	if r.GCPause <= 0 {
		t.Errorf("no GC pause window measured")
	}
}

// checkStepTLS: with TLS every pod of the steps that dial PD or TiKV carried --ca, --cert and
// --key (and each of pause, snapshot, restore-volumes, restore-data ran); without, none did.
func checkStepTLS(t *testing.T, r *demo.Report, tls bool) {
	t.Helper()
	for _, step := range []string{job.StepPause, job.StepSnapshot, job.StepRestoreVolumes, job.StepRestoreData} {
		n, withTLS := r.StepPods[step], r.StepPodsTLS[step]
		switch {
		case n == 0:
			t.Errorf("no %s pod found", step)
		case tls && withTLS != n:
			t.Errorf("TLS: %d of %d %s pods carried --ca, --cert and --key, want all", withTLS, n, step)
		case !tls && withTLS != 0:
			t.Errorf("plaintext: %d of %d %s pods carried --ca, --cert and --key, want none", withTLS, n, step)
		}
	}
}

// checkWarmup: one warm-up Job per TiKV member read every block of its volumes (the command
// exits 0 only then) and verified its RocksDB logs: sync (and check-wal-only) before TiKV was
// handed the volumes, async beside the restarted TiKV. A check-wal-only Job reads nothing but
// the data volume's logs.
func checkWarmup(t *testing.T, l *env.Lab, r *demo.Report, o demo.Options) {
	t.Helper()
	warmup, check := o.RestoreWarmup, o.RestoreWarmupStrategy == fedv1alpha1.RestoreWarmupStrategyCheckWALOnly
	if check {
		warmup = fedv1alpha1.RestoreWarmupSync // TiKV waits for the check
	}
	want, volumes := 3*len(l.DataPlanes), 1
	if o.RaftVolumes {
		volumes = 2
	}
	if r.Warmup != "WarmedUp" || r.WarmupJobs != want || r.WarmupJobsTotal != want {
		t.Errorf("warm-up %q, %d of %d Jobs succeeded; want WarmedUp, %d of %d", r.Warmup, r.WarmupJobs, r.WarmupJobsTotal, want, want)
	}
	if r.WarmupResults != want || r.WarmupWALChecks != want*volumes {
		t.Errorf("%d warm-up Jobs reported, verifying the RocksDB logs of %d volumes; want %d and %d", r.WarmupResults, r.WarmupWALChecks, want, want*volumes)
	}
	// fio reads every block of every volume, so every byte TiKV wrote: the lab's devices are the
	// volumes' loop devices, of the volumes' capacity (1 GiB).
	switch fio := int64(want*volumes) << 30; {
	case check && r.WarmupBytes != 0:
		t.Errorf("check-wal-only Jobs read %d B; want none (they verify the data volume's logs only)", r.WarmupBytes)
	case o.RestoreWarmupStrategy == fedv1alpha1.RestoreWarmupStrategyFio && r.WarmupBytes != fio:
		t.Errorf("fio Jobs read %d B; want every block of %d volumes of 1 GiB, %d B", r.WarmupBytes, want*volumes, fio)
	case !check && r.WarmupBytes <= 0:
		t.Errorf("warm-up Jobs read %d B; want more than nothing", r.WarmupBytes)
	}
	// A sync warm-up ends before its plane's TiKV gets the volumes (the Jobs' times come from the
	// kubelet, truncated to the second, which errs early; the handover is the demo's 100 ms
	// sample, which errs late).
	for _, dp := range l.DataPlanes {
		warm, handover := r.WarmupIn[dp.Cluster], r.TiKVHandedOver[dp.Cluster]
		switch {
		case warm.Start.IsZero() || warm.End.IsZero() || handover.IsZero():
			t.Errorf("%s: times missing: warm-up %+v, TiKV handed the volumes %v", dp.Cluster, warm, handover)
		case warmup == fedv1alpha1.RestoreWarmupSync && warm.End.After(handover):
			t.Errorf("%s: sync warm-up ended %v, after TiKV was handed the volumes %v", dp.Cluster, warm.End, handover)
		}
	}
	// An async warm-up pod starts after its own TiKV pod came back out of recovery mode and
	// became ready. Both times are the kubelets', truncated to the second, so no slack is needed.
	if warmup != fedv1alpha1.RestoreWarmupAsync {
		return
	}
	if len(r.WarmupPods) != want {
		t.Errorf("%d warm-up pods paired with their TiKV pods; want %d", len(r.WarmupPods), want)
	}
	for _, p := range r.WarmupPods {
		switch {
		case p.TiKVPod == "" || p.Started.IsZero() || p.TiKVReady.IsZero() || p.RecoveryPods == 0:
			t.Errorf("%s: warm-up pod %s: too little to judge: started %v, TiKV pod %q ready %v, %d TiKV pods seen in recovery mode",
				p.Plane, p.Pod, p.Started, p.TiKVPod, p.TiKVReady, p.RecoveryPods)
		case !p.TiKVFresh:
			t.Errorf("%s: warm-up pod %s warmed TiKV pod %s, which is still the one seen in recovery mode", p.Plane, p.Pod, p.TiKVPod)
		case p.Started.Before(p.TiKVReady):
			t.Errorf("%s: async warm-up pod %s started %v, before its TiKV pod %s was ready out of recovery mode %v", p.Plane, p.Pod, p.Started, p.TiKVPod, p.TiKVReady)
		}
	}
}

// BenchmarkFederatedBackupRestore runs the main job once in the lab and reports what the design
// targets (ARCHITECTURE.md §6) measure: the GC/PD pause window against its physical floor, the
// slowest CreateSnapshots call (as a ratio, and the excess over it: target ≤ 1 s), the skew
// between the first and the last snapshot start (which the AWS double stamps as EC2 does), the
// durations of the backup and the restore and their orchestration overheads. Run it with
// -benchtime=1x on an idle machine:
//
//	go test -run '^$' -bench FederatedBackupRestore -benchtime=1x ./test/e2e/
//
// -v prints the timeline and the pause window's breakdown; FEDBR_E2E_LAB_DIR=<dir> keeps the
// lab's logs (step pods under <dir>/<plane>/nodes, manager and agents under <dir>/demo).
func BenchmarkFederatedBackupRestore(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	l := labtest.Up(ctx, b)
	b.ResetTimer()
	for i := range b.N {
		if i > 0 {
			break // one run per lab: the demo's namespaces and address blocks are fixed
		}
		r, err := demo.Run(ctx, demo.Options{Lab: l, Out: labtest.Log{T: b}})
		if err != nil {
			b.Fatal(err)
		}
		var out strings.Builder
		r.Print(&out, demo.PrintOptions{Instrumentation: true})
		b.Log("\n" + out.String())
		b.ReportMetric(r.GCPause.Seconds(), "gc-pause-s")
		b.ReportMetric(r.SlowestCreateSnapshots.Seconds(), "floor-s")
		b.ReportMetric((r.GCPause - r.SlowestCreateSnapshots).Seconds(), "pause-over-floor-s")
		if r.SlowestCreateSnapshots > 0 {
			b.ReportMetric(r.GCPause.Seconds()/r.SlowestCreateSnapshots.Seconds(), "pause/floor")
		}
		b.ReportMetric(r.SnapshotSkew.Seconds(), "snapshot-skew-s")
		if r.WindowWrites != nil {
			b.ReportMetric(float64(r.WindowWrites.Total("")), "window-writes")
			b.ReportMetric(float64(r.WindowWrites.Total(r.Backup.Status.Initializer)), "window-writes-initializer")
		}
		b.ReportMetric(r.Backup.Status.TimeCompleted.Sub(r.Backup.Status.TimeStarted.Time).Seconds(), "backup-s")
		if o, ok := r.BackupOverhead(); ok {
			b.ReportMetric(o.Seconds(), "backup-overhead-s")
		}
		if r.BeforePause > 0 && r.AfterAWS > 0 {
			b.ReportMetric(r.BeforePause.Seconds(), "before-pause-s")
			b.ReportMetric(r.AfterAWS.Seconds(), "after-aws-s")
		}
		b.ReportMetric(r.Restore.Status.TimeCompleted.Sub(r.Restore.Status.TimeStarted.Time).Seconds(), "restore-s")
		if o, ok := r.RestoreOverhead(); ok {
			b.ReportMetric(o.Seconds(), "restore-overhead-s")
		}
	}
}

// checkDescribed: `fedbr describe` and `fedbr logs`, run as a user would at the end of the demo,
// show the completed backup and restore with every data plane's member, and the snapshot step's
// log from every plane.
func checkDescribed(t *testing.T, l *env.Lab, r *demo.Report) {
	t.Helper()
	backup, logs, restore := r.Described["describe backup"], r.Described["logs backup"], r.Described["describe restore"]
	for _, c := range []struct {
		what, out string
		want      []string
	}{
		{"describe backup", backup, []string{"VolumeBackup default/" + r.Backup.Name + "\n", "  Phase: Complete\n", "  Commit ts: " + r.Backup.Status.CommitTs + "\n", "GC pause: "}},
		{"describe restore", restore, []string{"VolumeRestore default/" + r.Restore.Name + "\n", "  Phase: Complete\n"}},
	} {
		for _, w := range c.want {
			if !strings.Contains(c.out, w) {
				t.Errorf("%s lacks %q:\n%s", c.what, w, c.out)
			}
		}
		for _, dp := range l.DataPlanes {
			if !strings.Contains(c.out, " in data plane "+dp.Cluster+"\n  Phase: ") {
				t.Errorf("%s does not show the member in %s:\n%s", c.what, dp.Cluster, c.out)
			}
		}
	}
	for _, dp := range l.DataPlanes {
		if !strings.Contains(logs, "==> "+dp.Cluster+"/") || !strings.Contains(logs, "(step snapshot) <==") {
			t.Errorf("fedbr logs shows no snapshot pod of %s:\n%s", dp.Cluster, logs)
		}
	}
	if strings.Contains(logs, "(no logs: ") {
		t.Errorf("fedbr logs could not read a step pod's log:\n%s", logs)
	}
}
