package daytwo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/tidbcluster"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/demo"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/lab/operator"
	brmeta "github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tidb"
)

// Day-2 scenarios: the paths an SRE takes after the first backup, each run end to end in one
// lab (RunDayTwo) against the source cluster and its bank workload.
const (
	// ScenarioPauseDeleted deletes the pause pod (graceful) once the pause holds and while every
	// CreateSnapshots is still in flight: the backup must fail, and leave nothing.
	ScenarioPauseDeleted = "pause pod deleted before the snapshots start"
	// ScenarioPauseKilled SIGKILLs the pause pod at the same moment: the backup must fail, and
	// the lift step must remove what the pause held from PD before its TTL could.
	ScenarioPauseKilled = "pause SIGKILLed, lifted before its TTL"
	// ScenarioDeleteInFlightDelete and ScenarioDeleteInFlightRetain delete a backup while its
	// CreateSnapshots calls are slow and in flight: no snapshot and no metadata may be left
	// once AWS has finished the calls the steps never saw answered.
	ScenarioDeleteInFlightDelete = "deleted with CreateSnapshots in flight, cleanPolicy Delete"
	ScenarioDeleteInFlightRetain = "deleted with CreateSnapshots in flight, cleanPolicy Retain"
	// ScenarioSchedule runs a VolumeBackupSchedule (cron every minute, maxBackups 2) for three
	// ticks: every backup completes, every step pod carries the schedule's label and IAM-role
	// annotation, retention keeps two and deletes the rest's snapshots; then a restore into
	// a TidbCluster with a name already taken by a claim is refused before its plane creates a
	// volume, and the newest backup restores exactly into another namespace and TidbCluster name.
	ScenarioSchedule = "schedule: three ticks, retention 2, refused and exact restores"
	// ScenarioTolerated restores a backup with tolerateSingleTiKVOutage while one TiKV of the
	// restored cluster never starts (its node is lost): the restore completes, exactly.
	ScenarioTolerated = "restore with one TiKV down, tolerateSingleTiKVOutage"
	// ScenarioFailedSized fails one snapshot after its plane's others completed: the backup
	// fails with the member's reason, and that member still reports the full size of what it
	// had snapshotted, measured before its snapshot step deleted it (#19).
	ScenarioFailedSized = "a snapshot fails after the others completed: the failed backup has a size"
	// ScenarioCrossTenant has another tenant, with namespaces of its own, try to restore the
	// lab's backup into its TidbClusters: by naming the backup's storage (refused by the
	// agents' storage roots) and from a copy of the backup's metadata under its own prefix
	// (refused by restore-volumes: the snapshots carry another namespace), neither making a
	// volume; the backup then restores exactly (issue 38).
	ScenarioCrossTenant = "another tenant restores our backup: refused before any volume, and it still restores exactly"
	// ScenarioEncrypted backs up the source cluster while its TiKV encrypts at rest with a KMS
	// key (spec.tikv.config), then restores into TidbClusters without encryption: every plane
	// refuses it (EncryptionMismatch, naming the key) before any volume is made from a snapshot
	// (issue 40; tidb-operator #4914).
	ScenarioEncrypted = "an encrypted backup restored without its key: refused before any volume"
	// ScenarioFailover fails a store of the last plane over as tidb-operator does
	// (status.tikv.failureStores: one TiKV pod more than spec.tikv.replicas, kept), then backs
	// up the source with that pod and restores it, exactly, into TidbClusters with as many TiKV
	// (issue 40). The source keeps the failover pod for the scenarios after it.
	ScenarioFailover = "a failed-over store's extra TiKV pod: backed up and restored exactly"
	// ScenarioDeleteWhileSizing deletes a backup that completed while its size steps still run
	// (AWS's block listings answer after sizeLatency): each plane's size step is stopped and its
	// pod gone before the clean starts, so the log it saves as it exits (the agents run with
	// --save-step-logs) cannot land after the clean; nothing of the backup is left, its step
	// logs included.
	ScenarioDeleteWhileSizing = "deleted while its size steps run: stopped before the clean, nothing left"
	// ScenarioScratch restores a backup as a scratch restore (spec.template.scratch, with
	// verify) into a namespace that holds no TidbCluster: each plane's agent makes the
	// TidbCluster the backup saved (the planes joined through spec.cluster), the restore completes
	// exactly, checked, and is the backup's Verified; deleting the restore then removes those
	// TidbClusters, every claim (tidb-operator's PD claims' PVs set to reclaim Delete for their
	// provisioner) and every restored volume (#42).
	ScenarioScratch = "a scratch restore: TidbClusters made from the backup, exact, and removed with everything it made"
	// ScenarioDrills runs a VolumeBackupSchedule with verify (every minute, every backup
	// drilled, maxBackups 2) into a drill namespace prepared in every plane: its first complete
	// backup is drilled (a scratch restore with verify the schedule creates), the backup is
	// Verified by that drill, and the schedule deletes the drill once judged, which removes the
	// TidbClusters, claims and volumes it made; the schedule's lastDrill names it (#42).
	ScenarioDrills = "a schedule that drills its backups: verified by the drill, and nothing of the drill left"
)

// DayTwoScenarios are every scenario, in the order RunDayTwo runs them.
var DayTwoScenarios = []string{ScenarioPauseDeleted, ScenarioPauseKilled, ScenarioDeleteInFlightDelete,
	ScenarioDeleteInFlightRetain, ScenarioFailedSized, ScenarioTolerated, ScenarioSchedule, ScenarioCrossTenant, ScenarioEncrypted, ScenarioFailover, ScenarioDeleteWhileSizing, ScenarioScratch, ScenarioDrills}

// DayTwoResult is what one scenario came to.
type DayTwoResult struct {
	Scenario string
	// Outcome says what ended the scenario's backups or restores (their phase and reason).
	Outcome string
	Took    time.Duration
	Err     error
}

// Day-2 lab settings: CreateSnapshots held this long keeps the snapshots in flight while a
// scenario strikes; the agents sweep orphans this soon, so a snapshot AWS creates after its
// Backup is gone is deleted within the scenario.
const (
	inFlight         = 20 * time.Second
	dayTwoGrace      = 10 * time.Second
	dayTwoSweepEvery = 5 * time.Second
	// roleAnnotation is a pod-level IAM role annotation (kube2iam's): it must reach every
	// step pod of every plane.
	roleAnnotation = "iam.amazonaws.com/role"
	roleARN        = "arn:aws:iam::123456789012:role/fedbr-steps"
)

// RunDayTwo runs the named scenarios (all when names is empty) in one lab: the source cluster
// and its bank once, then each scenario, and after each one the same checks as the crash suite:
// the source holds no pause, and the AWS double holds no snapshot or volume the scenario left.
func RunDayTwo(ctx context.Context, o demo.Options, names []string) ([]DayTwoResult, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.WithDefaults()
	// --pod-labels: the operator lets the label team (podsCarry) reach the step pods; the IAM
	// role annotation travels by default. --save-step-logs: a deleted backup must leave no step
	// log either (gone).
	o.AgentArgs = append(o.AgentArgs, "--orphan-grace", dayTwoGrace.String(), "--orphan-sweep-interval", dayTwoSweepEvery.String(),
		"--pod-labels", "team", "--save-step-logs")
	if len(names) == 0 {
		names = DayTwoScenarios
	}
	for _, n := range names {
		if !slices.Contains(DayTwoScenarios, n) {
			return nil, fmt.Errorf("no day-2 scenario %q", n)
		}
	}
	d, err := newRun(ctx, o)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	if err := d.StartSuite(ctx); err != nil {
		return nil, err
	}
	var out []DayTwoResult
	for i, name := range names {
		d.Say("day-2 scenario %d/%d: %s", i+1, len(names), name)
		start := time.Now()
		res := DayTwoResult{Scenario: name}
		switch name {
		case ScenarioPauseDeleted:
			res.Outcome, res.Err = d.pauseEndsEarly(ctx, fmt.Sprintf(demo.DayTwoName, i), false)
		case ScenarioPauseKilled:
			res.Outcome, res.Err = d.pauseEndsEarly(ctx, fmt.Sprintf(demo.DayTwoName, i), true)
		case ScenarioDeleteInFlightDelete:
			res.Outcome, res.Err = d.deleteInFlight(ctx, fmt.Sprintf(demo.DayTwoName, i), fedv1alpha1.CleanPolicyDelete)
		case ScenarioDeleteInFlightRetain:
			res.Outcome, res.Err = d.deleteInFlight(ctx, fmt.Sprintf(demo.DayTwoName, i), fedv1alpha1.CleanPolicyRetain)
		case ScenarioTolerated:
			res.Outcome, res.Err = d.toleratedOutage(ctx, fmt.Sprintf(demo.DayTwoName, i))
		case ScenarioSchedule:
			res.Outcome, res.Err = d.schedule(ctx, fmt.Sprintf(demo.DayTwoName, i))
		case ScenarioFailedSized:
			res.Outcome, res.Err = d.failedSized(ctx, fmt.Sprintf(demo.DayTwoName, i))
		case ScenarioCrossTenant:
			res.Outcome, res.Err = d.crossTenant(ctx, fmt.Sprintf(demo.DayTwoName, i))
		case ScenarioEncrypted:
			res.Outcome, res.Err = d.encryptedRefused(ctx, fmt.Sprintf(demo.DayTwoName, i))
		case ScenarioFailover:
			res.Outcome, res.Err = d.failover(ctx, fmt.Sprintf(demo.DayTwoName, i))
		case ScenarioDeleteWhileSizing:
			res.Outcome, res.Err = d.deleteWhileSizing(ctx, fmt.Sprintf(demo.DayTwoName, i))
		case ScenarioScratch:
			res.Outcome, res.Err = d.scratch(ctx, fmt.Sprintf(demo.DayTwoName, i))
		case ScenarioDrills:
			res.Outcome, res.Err = d.drills(ctx, fmt.Sprintf(demo.DayTwoName, i))
		}
		// Whatever happened, the next scenario starts from a clean AWS double and PD.
		if err := d.SetFaults(ctx, awsdouble.Faults{}); err != nil && res.Err == nil {
			res.Err = err
		}
		if res.Err == nil {
			_, res.Err = d.WaitLifted(ctx)
		}
		if res.Err == nil {
			res.Err = d.nothingLeft(ctx)
		}
		res.Took = time.Since(start)
		if res.Err != nil {
			d.Say("day-2 scenario %s: %v", name, res.Err)
		} else {
			d.Say("day-2 scenario %s: %s (%s)", name, res.Outcome, res.Took.Round(time.Second))
		}
		out = append(out, res)
		if ctx.Err() != nil {
			break
		}
	}
	return out, nil
}

// slowSnapshots holds every CreateSnapshots call for inFlight before AWS runs it; AWS runs it
// even when the caller has given up by then.
func (d *run) slowSnapshots(ctx context.Context) error {
	return d.SetFaults(ctx, awsdouble.Faults{Latency: map[string]awsdouble.Duration{"CreateSnapshots": awsdouble.Duration(inFlight)}})
}

// backupInFlight creates b with every CreateSnapshots held by AWS (slowSnapshots) and returns
// its member UIDs once the AWS double holds all of its calls.
func (d *run) backupInFlight(ctx context.Context, b *fedv1alpha1.VolumeBackup) ([]string, error) {
	if err := d.slowSnapshots(ctx); err != nil {
		return nil, err
	}
	if err := d.Kube()[d.Lab().Control].Create(ctx, b); err != nil {
		return nil, fmt.Errorf("create VolumeBackup: %w", err)
	}
	uids, err := d.memberUIDs(ctx, b)
	if err != nil {
		return nil, err
	}
	return uids, d.snapshotsInFlight(ctx)
}

// backupEnded creates b and waits until it is Failed or Complete; it returns its members' UIDs.
func (d *run) backupEnded(ctx context.Context, b *fedv1alpha1.VolumeBackup) ([]string, error) {
	if err := d.Kube()[d.Lab().Control].Create(ctx, b); err != nil {
		return nil, fmt.Errorf("create VolumeBackup: %w", err)
	}
	uids, err := d.memberUIDs(ctx, b)
	if err != nil {
		return nil, err
	}
	return uids, d.ended(ctx, b)
}

// memberUIDs are the UIDs of a backup's members in every plane (the snapshots' fedbr.io/backup
// tag), read once they all exist.
func (d *run) memberUIDs(ctx context.Context, b *fedv1alpha1.VolumeBackup) ([]string, error) {
	var uids []string
	err := d.Poll(ctx, "members of "+b.Name, func() (bool, string, error) {
		uids = uids[:0]
		for _, dp := range d.Lab().DataPlanes {
			var m dpv1alpha1.VolumeBackupMember
			if err := d.Kube()[dp.Cluster].Get(ctx, client.ObjectKey{Namespace: d.Options().Namespace, Name: fedv1alpha1.MemberName(b.Name)}, &m); err != nil {
				return false, "waiting for the member in " + dp.Cluster, client.IgnoreNotFound(err)
			}
			uids = append(uids, string(m.UID))
		}
		return true, "", nil
	})
	return uids, err
}

// awsStats reads the AWS double's counters.
func (d *run) awsStats(ctx context.Context) (awsdouble.Stats, error) {
	return d.AWSAdmin().Stats(ctx)
}

// inFlightCalls is how many CreateSnapshots calls the AWS double has received and not yet run.
func (d *run) inFlightCalls(ctx context.Context) (int, error) {
	st, err := d.awsStats(ctx)
	return st.InFlight["CreateSnapshots"], err
}

// snapshotsInFlight waits until the AWS double holds every CreateSnapshots of the backup (one
// per TiKV instance of every plane).
func (d *run) snapshotsInFlight(ctx context.Context) error {
	want := d.Options().TiKVPerPlane * len(d.Lab().DataPlanes)
	return d.Poll(ctx, "every CreateSnapshots in flight", func() (bool, string, error) {
		n, err := d.inFlightCalls(ctx)
		return n == want, fmt.Sprintf("%d of %d CreateSnapshots calls held by AWS", n, want), err
	})
}

// ended waits until b is Failed or Complete and returns it.
func (d *run) ended(ctx context.Context, b *fedv1alpha1.VolumeBackup) error {
	c := d.Kube()[d.Lab().Control]
	return d.Poll(ctx, "the end of "+b.Name, func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, "", err
		}
		p := b.Status.Phase
		return p == fedv1alpha1.VolumeBackupFailed || p == fedv1alpha1.VolumeBackupComplete, "backup " + string(p), nil
	})
}

// gone waits until AWS has run every CreateSnapshots it received, then until no snapshot
// carries any of the backup's member UIDs and no object (backupmeta, manifests, step logs; the
// clean's tombstone aside, which marks the prefix cleaned) is left under its prefixes: the
// calls in flight create snapshots nothing records, which the agents' orphan sweeper deletes
// dayTwoGrace after they appear. A backup deleted with cleanPolicy Retain keeps what it wrote
// but its snapshots and backupmeta (a stopped snapshot step deletes the snapshots it started
// and its pending backupmeta): its manifests and step logs stay, as Retain says.
func (d *run) gone(ctx context.Context, b *fedv1alpha1.VolumeBackup, uids []string) error {
	retained := b.Spec.Template.CleanPolicy == fedv1alpha1.CleanPolicyRetain
	err := d.Poll(ctx, "AWS done with every CreateSnapshots", func() (bool, string, error) {
		n, err := d.inFlightCalls(ctx)
		return n == 0, fmt.Sprintf("%d CreateSnapshots calls still held by AWS", n), err
	})
	if err != nil {
		return err
	}
	return d.Poll(ctx, "no snapshot or object of "+b.Name, func() (bool, string, error) {
		n := 0
		for _, uid := range uids {
			snaps, err := d.AWS().ListSnapshots(ctx, map[string]string{"fedbr.io/backup": uid})
			if err != nil {
				return false, "", err
			}
			n += len(snaps)
		}
		var files []string
		for _, dp := range d.Lab().DataPlanes {
			root := filepath.Join(d.Lab().AWS.Dir, "s3", demo.Bucket, "objects", filepath.FromSlash(b.Spec.Template.MemberStorage(dp.Cluster).S3.Prefix))
			_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
				switch {
				case err != nil || e.IsDir() || filepath.Base(p) == brmeta.TombstoneKey: // the clean's tombstone stays by design
				case retained && filepath.Base(p) != brmeta.BackupMetaKey: // Retain keeps the manifests and the steps' logs
				default:
					files = append(files, p) // the backupmeta, the manifests, the steps' logs
				}
				return nil
			})
		}
		return n == 0 && len(files) == 0, fmt.Sprintf("%d snapshots and objects %v left", n, files), nil
	})
}

// pauseEndsEarly: the pause holds, every CreateSnapshots is in flight (held by AWS), and the
// pause pod is deleted (graceful: the pause lifts and exits 0) or SIGKILLed (it lifts nothing;
// the agent's lift step must). The backup must fail naming the pause, leave nothing once
// deleted, and a killed pause's GC safepoint must be gone while its TTL still ran.
func (d *run) pauseEndsEarly(ctx context.Context, name string, kill bool) (string, error) {
	b := d.NewBackup(name)
	uids, err := d.backupInFlight(ctx, b)
	if err != nil {
		return "", err
	}
	c := d.Kube()[d.Lab().Control]
	pdURL := d.Lab().DataPlanes[0].PDAddress()
	expiry, err := d.pauseExpiry(ctx, pdURL)
	if err != nil {
		return "", err
	}
	member := fedv1alpha1.MemberName(b.Name)
	plane := d.Lab().DataPlanes[0].Cluster
	if kill {
		if err := d.KillStep(ctx, []string{plane}, d.Options().Namespace, member, job.StepPause); err != nil {
			return "", err
		}
	} else if err := d.deleteStepPod(ctx, plane, member, job.StepPause); err != nil {
		return "", err
	}
	if err := d.ended(ctx, b); err != nil {
		return "", err
	}
	failed := meta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition)
	if b.Status.Phase != fedv1alpha1.VolumeBackupFailed || failed == nil {
		return string(b.Status.Phase), fmt.Errorf("backup %s ended %s after its pause ended before any snapshot started; want Failed", b.Name, b.Status.Phase)
	}
	outcome := "Failed: " + failed.Reason + ": " + failed.Message
	// Whichever saw it first: the agent (the pause stopped, or its Job failed, unasked) or a
	// snapshot step (PD no longer lists the pause's safepoint).
	want := []string{dpv1alpha1.BackupMemberPauseEndedUnaskedReason, "the pause no longer holds", "the pause did not hold"}
	if kill {
		want = []string{dpv1alpha1.BackupMemberPauseJobFailedReason, "the pause no longer holds", "the pause did not hold"}
	}
	if failed.Reason != fedv1alpha1.MemberFailedReason || !slices.ContainsFunc(want, func(w string) bool { return strings.Contains(failed.Message, w) }) {
		return outcome, fmt.Errorf("backup %s failed with %s: %s; want %s naming one of %q", b.Name, failed.Reason, failed.Message, fedv1alpha1.MemberFailedReason, want)
	}
	if kill {
		if err := d.liftedByStep(ctx, plane, member, pdURL, expiry); err != nil {
			return outcome, err
		}
	}
	// A snapshot step that found the pause gone once its calls returned deleted their
	// snapshots itself and failed settled: its clean waits for none.
	if err := d.DeleteAndWait(ctx, c, b); err != nil {
		return outcome, err
	}
	return outcome, d.gone(ctx, b, uids)
}

// pauseExpiry is when the live fedbr pause's GC safepoint would lapse, as PD lists it.
func (d *run) pauseExpiry(ctx context.Context, pdURL string) (time.Time, error) {
	var expiry time.Time
	err := d.Poll(ctx, "the pause's GC safepoint in PD", func() (bool, string, error) {
		sps, err := d.TLS().ServiceSafePoints(ctx, d.PDURL(pdURL))
		if err != nil {
			return false, "", err
		}
		for _, s := range sps {
			if strings.HasPrefix(s.ServiceID, tidb.PauseServicePrefix) {
				expiry = time.Unix(s.ExpiredAt, 0)
				return true, "", nil
			}
		}
		return false, "no fedbr safepoint listed yet", nil
	})
	return expiry, err
}

// liftedByStep waits for the initializer to report GC resumed by the lift step (reason Lifted)
// and checks that PD then holds nothing of any pause while the killed pause's safepoint would
// still have been live: the lift removed it, its TTL did not.
func (d *run) liftedByStep(ctx context.Context, plane, member, pdURL string, expiry time.Time) error {
	err := d.Poll(ctx, "GC resumed by the lift step", func() (bool, string, error) {
		var m dpv1alpha1.VolumeBackupMember
		if err := d.Kube()[plane].Get(ctx, client.ObjectKey{Namespace: d.Options().Namespace, Name: member}, &m); err != nil {
			return false, "", err
		}
		c := meta.FindStatusCondition(m.Status.Conditions, dpv1alpha1.BackupMemberGCResumedCondition)
		if c != nil && c.Status == metav1.ConditionTrue && c.Reason != dpv1alpha1.BackupMemberLiftedReason {
			return false, "", fmt.Errorf("GC resumed with %s (%s), want %s: the killed pause cannot have lifted anything", c.Reason, c.Message, dpv1alpha1.BackupMemberLiftedReason)
		}
		if c == nil {
			return false, "GCResumed not reported", nil
		}
		return c.Status == metav1.ConditionTrue, "GCResumed " + string(c.Status) + " " + c.Reason, nil
	})
	if err != nil {
		return err
	}
	sps, err := d.TLS().ServiceSafePoints(ctx, d.PDURL(pdURL))
	if err != nil {
		return err
	}
	now := time.Now()
	for _, s := range sps {
		if strings.HasPrefix(s.ServiceID, tidb.PauseServicePrefix) {
			return fmt.Errorf("PD still lists %s after the lift step reported it lifted", s.ServiceID)
		}
	}
	if !now.Before(expiry) {
		return fmt.Errorf("the lift was confirmed at %s, after the killed pause's safepoint would have lapsed (%s): this does not show the lift removed it", now.Format(time.RFC3339), expiry.Format(time.RFC3339))
	}
	d.Say("  the lift step removed the killed pause's hold %s before its TTL would have", expiry.Sub(now).Round(time.Second))
	return nil
}

// deleteStepPod deletes (gracefully) the running pod of a member's step in one plane.
func (d *run) deleteStepPod(ctx context.Context, plane, member, step string) error {
	return d.Poll(ctx, "a running "+step+" pod in "+plane, func() (bool, string, error) {
		sel := job.Selector(member)
		sel[job.LabelStep] = step
		var list corev1.PodList
		if err := d.Kube()[plane].List(ctx, &list, client.InNamespace(d.Options().Namespace), client.MatchingLabels(sel)); err != nil {
			return false, "", err
		}
		for i := range list.Items {
			pod := &list.Items[i]
			if pod.Status.Phase != corev1.PodRunning || pod.DeletionTimestamp != nil {
				continue
			}
			if err := d.Kube()[plane].Delete(ctx, pod); err != nil {
				return false, "", fmt.Errorf("delete pod %s: %w", pod.Name, err)
			}
			d.Say("  pod %s/%s (%s) deleted", pod.Namespace, pod.Name, step)
			return true, "", nil
		}
		return false, "waiting for the " + step + " pod to run", nil
	})
}

// deleteInFlight deletes a backup while every CreateSnapshots call is held by AWS: the steps
// are stopped and the calls they never saw answered still create snapshots, which nothing
// records. None may be left.
func (d *run) deleteInFlight(ctx context.Context, name string, policy fedv1alpha1.CleanPolicyType) (string, error) {
	b := d.NewBackup(name)
	b.Spec.Template.CleanPolicy = policy
	uids, err := d.backupInFlight(ctx, b)
	if err != nil {
		return "", err
	}
	c := d.Kube()[d.Lab().Control]
	deleted := time.Now()
	if err := d.DeleteAndWait(ctx, c, b); err != nil {
		return "", err
	}
	d.Say("  VolumeBackup %s (%s) gone %s after its deletion, with its CreateSnapshots calls still held by AWS", name, policy, time.Since(deleted).Round(100*time.Millisecond))
	if err := d.gone(ctx, b, uids); err != nil {
		return "", err
	}
	return "deleted; no snapshot or metadata left", nil
}

// sizeLatency is how long AWS takes to answer a block listing in ScenarioDeleteWhileSizing:
// the size steps run at least that long after the backup completed.
const sizeLatency = 30 * time.Second

// deleteWhileSizing runs ScenarioDeleteWhileSizing. A first backup completes as usual, so that
// the second's size steps compare each volume's new snapshot with its earlier one
// (ListChangedBlocks); AWS then answers block listings only after sizeLatency, the second
// backup completes, and once a plane's size step reports Sizing without a result it is
// deleted. It must go with every step pod of its members ended, and leave no snapshot, metadata
// or step log; the first is deleted after it.
func (d *run) deleteWhileSizing(ctx context.Context, name string) (string, error) {
	c := d.Kube()[d.Lab().Control]
	base := d.NewBackup(name + "-base")
	baseUIDs, err := d.backupEnded(ctx, base)
	if err != nil {
		return "", err
	}
	if base.Status.Phase != fedv1alpha1.VolumeBackupComplete {
		return "", fmt.Errorf("backup %s ended %s: %s", base.Name, base.Status.Phase, demo.ConditionMessage(base.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition))
	}
	slow := awsdouble.Duration(sizeLatency)
	if err := d.SetFaults(ctx, awsdouble.Faults{Latency: map[string]awsdouble.Duration{"ListSnapshotBlocks": slow, "ListChangedBlocks": slow}}); err != nil {
		return "", err
	}
	b := d.NewBackup(name)
	if err := c.Create(ctx, b); err != nil {
		return "", fmt.Errorf("create VolumeBackup: %w", err)
	}
	uids, err := d.memberUIDs(ctx, b)
	if err != nil {
		return "", err
	}
	var sizing []string
	err = d.Poll(ctx, b.Name+" complete with its size steps running", func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, "", err
		}
		if b.Status.Phase == fedv1alpha1.VolumeBackupFailed {
			return false, "", fmt.Errorf("backup %s failed: %s", b.Name, demo.ConditionMessage(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition))
		}
		if b.Status.Phase != fedv1alpha1.VolumeBackupComplete {
			return false, "phase " + string(b.Status.Phase), nil
		}
		sizing = sizing[:0]
		for _, dp := range d.Lab().DataPlanes {
			var m dpv1alpha1.VolumeBackupMember
			if err := d.Kube()[dp.Cluster].Get(ctx, client.ObjectKey{Namespace: d.Options().Namespace, Name: fedv1alpha1.MemberName(b.Name)}, &m); err != nil {
				return false, "", err
			}
			if s, ok := dpv1alpha1.Step(m.Status.Steps, dpv1alpha1.StepSize); ok && s.Phase == "Sizing" && s.Result == nil {
				sizing = append(sizing, dp.Cluster)
			}
		}
		return len(sizing) > 0, fmt.Sprintf("Complete; size steps running in %v", sizing), nil
	})
	if err != nil {
		return "", err
	}
	deleted := time.Now()
	if err := d.DeleteAndWait(ctx, c, b); err != nil {
		return "", err
	}
	d.Say("  VolumeBackup %s gone %s after its deletion, with its size steps running in %v", name, time.Since(deleted).Round(100*time.Millisecond), sizing)
	// Nothing of the deleted backup still runs: every step pod of its members has ended (a
	// finished step's Job and pod stay until the Job's TTL, as every step's do).
	for _, dp := range d.Lab().DataPlanes {
		var pods corev1.PodList
		if err := d.Kube()[dp.Cluster].List(ctx, &pods, client.InNamespace(d.Options().Namespace), client.MatchingLabels(job.Selector(fedv1alpha1.MemberName(b.Name)))); err != nil {
			return "", err
		}
		for _, p := range pods.Items {
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				return "", fmt.Errorf("step pod %s of the deleted backup %s still %s in %s", p.Name, b.Name, p.Status.Phase, dp.Cluster)
			}
		}
	}
	if err := d.gone(ctx, b, uids); err != nil {
		return "", err
	}
	if err := d.DeleteAndWait(ctx, c, base); err != nil {
		return "", err
	}
	if err := d.gone(ctx, base, baseUIDs); err != nil {
		return "", err
	}
	return fmt.Sprintf("deleted while sizing in %v; no step pod, snapshot, metadata or log left", sizing), nil
}

// failedSized runs ScenarioFailedSized: the next snapshot AWS creates turns error 20 s after its
// start, long after the others of its plane completed (the lab's snapshots take 5 s). The
// Backup must fail naming the snapshot step, the failed member must say Sized=True
// SizedBeforeCleanup with a backupSize, and the VolumeBackup's entry for it must carry that size
// with the failure's reason; then the backup is deleted and leaves nothing.
func (d *run) failedSized(ctx context.Context, name string) (string, error) {
	if err := d.SetFaults(ctx, awsdouble.Faults{SnapshotErrors: 1, SnapshotErrorAfter: awsdouble.Duration(20 * time.Second)}); err != nil {
		return "", err
	}
	b := d.NewBackup(name)
	c := d.Kube()[d.Lab().Control]
	uids, err := d.backupEnded(ctx, b)
	if err != nil {
		return "", err
	}
	failed := meta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition)
	if b.Status.Phase != fedv1alpha1.VolumeBackupFailed || failed == nil || !strings.Contains(failed.Message, dpv1alpha1.BackupMemberSnapshotFailedReason) {
		return string(b.Status.Phase), fmt.Errorf("backup %s ended %s (%v) with one snapshot in error; want Failed naming %s", b.Name, b.Status.Phase, failed, dpv1alpha1.BackupMemberSnapshotFailedReason)
	}
	var entry fedv1alpha1.VolumeBackupMemberStatus
	err = d.Poll(ctx, "the failed member's size on "+b.Name, func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, "", err
		}
		for _, e := range b.Status.Backups {
			if e.Reason == dpv1alpha1.BackupMemberSnapshotFailedReason {
				entry = e
				return e.BackupSize > 0, fmt.Sprintf("member in %s failed, backupSize %d", e.K8sClusterName, e.BackupSize), nil
			}
		}
		return false, "no failed member entry yet", nil
	})
	if err != nil {
		return "", err
	}
	var m dpv1alpha1.VolumeBackupMember
	if err := d.Kube()[entry.K8sClusterName].Get(ctx, client.ObjectKey{Namespace: d.Options().Namespace, Name: fedv1alpha1.MemberName(b.Name)}, &m); err != nil {
		return "", err
	}
	sized := meta.FindStatusCondition(m.Status.Conditions, dpv1alpha1.BackupMemberSizedCondition)
	if sized == nil || sized.Status != metav1.ConditionTrue || sized.Reason != dpv1alpha1.BackupMemberSizedBeforeCleanupReason || m.Status.BackupSize != entry.BackupSize {
		return "", fmt.Errorf("failed member in %s: Sized %+v, backupSize %d; want True %s with the entry's %d", entry.K8sClusterName, sized,
			m.Status.BackupSize, dpv1alpha1.BackupMemberSizedBeforeCleanupReason, entry.BackupSize)
	}
	outcome := fmt.Sprintf("Failed (%s); the failed member in %s reports %d bytes: %s", failed.Reason, entry.K8sClusterName, entry.BackupSize, sized.Message)
	if err := d.DeleteAndWait(ctx, c, b); err != nil {
		return outcome, err
	}
	return outcome, d.gone(ctx, b, uids)
}

// nothingLeft checks the AWS double holds no snapshot but those of backups that still exist,
// and no volume that no PV uses but those that existed before the scenarios.
func (d *run) nothingLeft(ctx context.Context) error {
	var backups fedv1alpha1.VolumeBackupList
	if err := d.Kube()[d.Lab().Control].List(ctx, &backups); err != nil {
		return err
	}
	live := map[string]bool{}
	for _, b := range backups.Items {
		for _, dp := range d.Lab().DataPlanes {
			var m dpv1alpha1.VolumeBackupMember
			if err := d.Kube()[dp.Cluster].Get(ctx, client.ObjectKey{Namespace: d.Options().Namespace, Name: fedv1alpha1.MemberName(b.Name)}, &m); err == nil {
				live[string(m.UID)] = true
			}
		}
	}
	return d.LeftBehind(ctx, live)
}

// schedule runs the schedule scenario (ScenarioSchedule).
func (d *run) schedule(ctx context.Context, name string) (string, error) {
	c := d.Kube()[d.Lab().Control]
	s := &fedv1alpha1.VolumeBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demo.ControlNamespace,
		Labels: map[string]string{"team": "sre"}, Annotations: map[string]string{roleAnnotation: roleARN}}}
	s.Spec.Schedule = "* * * * *"
	s.Spec.MaxBackups = ptr.To[int32](2)
	s.Spec.BackupTemplate = d.NewBackup(name).Spec
	if err := c.Create(ctx, s); err != nil {
		return "", fmt.Errorf("create VolumeBackupSchedule: %w", err)
	}
	d.Say("  VolumeBackupSchedule default/%s: every minute, maxBackups 2", name)
	complete, uids, order, err := d.threeTicks(ctx, name)
	if err != nil {
		return "", err
	}
	// No more ticks: the rest works on what the three left. A merge patch of the one field, as
	// `kubectl patch` sends it: the manager writes the schedule's status all the while, and an
	// update of the whole object from an earlier read is refused for any such write.
	before := s.DeepCopy()
	s.Spec.Pause = true
	if err := c.Patch(ctx, s, client.MergeFrom(before)); err != nil {
		return "", fmt.Errorf("pause the schedule: %w", err)
	}
	var kept []string
	err = d.Poll(ctx, "retention of "+name, func() (bool, string, error) {
		var list fedv1alpha1.VolumeBackupList
		if err := c.List(ctx, &list, client.InNamespace(demo.ControlNamespace), client.MatchingLabels{volumebackupschedule.ScheduleLabel: name}); err != nil {
			return false, "", err
		}
		kept = kept[:0]
		for _, b := range list.Items {
			if b.DeletionTimestamp == nil && b.Status.Phase == fedv1alpha1.VolumeBackupComplete {
				kept = append(kept, b.Name)
			}
		}
		sort.Strings(kept)
		return len(kept) == 2 && len(list.Items) == 2, fmt.Sprintf("%d backups, complete and kept %v", len(list.Items), kept), nil
	})
	if err != nil {
		return "", err
	}
	newest := complete[order[len(order)-1]]
	if !slices.Contains(kept, newest.Name) {
		return "", fmt.Errorf("retention kept %v, not the newest complete backup %s", kept, newest.Name)
	}
	for _, n := range order {
		if !slices.Contains(kept, n) {
			if err := d.gone(ctx, complete[n], uids[n]); err != nil {
				return "", fmt.Errorf("backup %s removed by retention: %w", n, err)
			}
		}
	}
	d.Say("  retention kept %v; the older backups' snapshots and metadata are gone", kept)

	if err := d.WaitTransfersAfter(ctx, newest); err != nil {
		return "", err
	}
	refused, err := d.refusedRestore(ctx, newest)
	if err != nil {
		return "", err
	}
	prevNS, prevTC := d.Options().RestoreNamespace, d.Options().RestoreTCName
	defer func() { d.Options().RestoreNamespace, d.Options().RestoreTCName = prevNS, prevTC }()
	d.Options().RestoreNamespace, d.Options().RestoreTCName = name+"-restored", "elsewhere"
	d.Options().RestoreMeta = metav1.ObjectMeta{Labels: map[string]string{"team": "sre"}, Annotations: map[string]string{roleAnnotation: roleARN}}
	defer func() { d.Options().RestoreMeta = metav1.ObjectMeta{} }()
	r, err := d.Restore(ctx, newest)
	if err != nil {
		return "", err
	}
	if err := d.restorePodsCarry(ctx, r); err != nil {
		return "", err
	}
	if err := d.Check(ctx, newest, r); err != nil {
		return "", err
	}
	if err := d.DeleteAndWait(ctx, c, r); err != nil {
		return "", err
	}
	if err := d.DeleteRestored(ctx, d.Options().RestoreNamespace); err != nil {
		return "", err
	}
	// The schedule goes, then its backups (deleting a schedule leaves them, as upstream).
	if err := d.DeleteAndWait(ctx, c, s); err != nil {
		return "", err
	}
	for _, n := range kept {
		if err := d.DeleteAndWait(ctx, c, complete[n]); err != nil {
			return "", err
		}
		if err := d.gone(ctx, complete[n], uids[n]); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("3 scheduled backups complete, kept %v; %s; %s restored exactly into %s/%s", kept, refused, newest.Name,
		name+"-restored", "elsewhere"), nil
}

// threeTicks waits for three of the schedule's backups to complete, checking each as it
// completes (its step pods, its member UIDs): retention may delete it right after, so each is
// read once Complete and never looked up again. It returns them by name, their member UIDs,
// and their names in creation order.
func (d *run) threeTicks(ctx context.Context, name string) (map[string]*fedv1alpha1.VolumeBackup, map[string][]string, []string, error) {
	c := d.Kube()[d.Lab().Control]
	complete := map[string]*fedv1alpha1.VolumeBackup{}
	uids := map[string][]string{}
	var order []string
	err := d.PollFor(ctx, 5*time.Minute, "three scheduled backups of "+name, func() (bool, string, error) {
		var list fedv1alpha1.VolumeBackupList
		if err := c.List(ctx, &list, client.InNamespace(demo.ControlNamespace), client.MatchingLabels{volumebackupschedule.ScheduleLabel: name}); err != nil {
			return false, "", err
		}
		var state []string
		for i := range list.Items {
			b := &list.Items[i]
			if _, ok := complete[b.Name]; ok || b.DeletionTimestamp != nil {
				continue
			}
			switch b.Status.Phase {
			case fedv1alpha1.VolumeBackupFailed:
				return false, "", fmt.Errorf("scheduled backup %s failed: %s", b.Name, demo.ConditionMessage(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition))
			case fedv1alpha1.VolumeBackupComplete:
				u, err := d.stepPodsCarry(ctx, b)
				if err != nil {
					return false, "", err
				}
				complete[b.Name], uids[b.Name] = b.DeepCopy(), u
				order = append(order, b.Name)
				d.Say("  scheduled backup %s complete (commit ts %s); its step pods carry the schedule's label and role", b.Name, b.Status.CommitTs)
			default:
				state = append(state, b.Name+" "+string(b.Status.Phase))
			}
		}
		return len(complete) >= 3, fmt.Sprintf("%d complete; %v", len(complete), state), nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	sort.Slice(order, func(i, j int) bool {
		return complete[order[i]].CreationTimestamp.Before(&complete[order[j]].CreationTimestamp)
	})
	return complete, uids, order, nil
}

// stepPodsCarry checks every step pod of a backup in every plane carries the schedule's label
// and the IAM-role annotation, and returns the backup's member UIDs.
func (d *run) stepPodsCarry(ctx context.Context, b *fedv1alpha1.VolumeBackup) ([]string, error) {
	var uids []string
	for _, dp := range d.Lab().DataPlanes {
		member := fedv1alpha1.MemberName(b.Name)
		var m dpv1alpha1.VolumeBackupMember
		if err := d.Kube()[dp.Cluster].Get(ctx, client.ObjectKey{Namespace: d.Options().Namespace, Name: member}, &m); err != nil {
			return nil, fmt.Errorf("member of %s in %s: %w", b.Name, dp.Cluster, err)
		}
		uids = append(uids, string(m.UID))
		if _, err := d.podsCarry(ctx, dp.Cluster, d.Options().Namespace, member); err != nil {
			return nil, err
		}
	}
	return uids, nil
}

// podsCarry checks every step pod of a member in one plane carries the label team=sre and the
// IAM-role annotation, and says how many there are.
func (d *run) podsCarry(ctx context.Context, plane, ns, member string) (int, error) {
	var pods corev1.PodList
	if err := d.Kube()[plane].List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(job.Selector(member))); err != nil {
		return 0, err
	}
	for _, p := range pods.Items {
		if p.Annotations[roleAnnotation] != roleARN || p.Labels["team"] != "sre" {
			return 0, fmt.Errorf("step pod %s/%s in %s has annotation %s=%q and label team=%q; want %q and %q",
				p.Namespace, p.Name, plane, roleAnnotation, p.Annotations[roleAnnotation], p.Labels["team"], roleARN, "sre")
		}
	}
	if len(pods.Items) == 0 {
		return 0, fmt.Errorf("no step pod of %s/%s in %s", ns, member, plane)
	}
	return len(pods.Items), nil
}

// restorePodsCarry checks the step pods of a restore in every plane (restore-volumes in each,
// restore-data in one) carry the label and the annotation.
func (d *run) restorePodsCarry(ctx context.Context, r *fedv1alpha1.VolumeRestore) error {
	total := 0
	for _, dp := range d.Lab().DataPlanes {
		n, err := d.podsCarry(ctx, dp.Cluster, d.Options().RestoreNamespace, fedv1alpha1.MemberName(r.Name))
		if err != nil {
			return err
		}
		total += n
	}
	d.Say("  the restore's %d step pods in %d planes carry the label and the IAM role", total, len(d.Lab().DataPlanes))
	return nil
}

// refusedRestore restores b into a TidbCluster whose namespace, in every data plane, already
// holds a claim under the name a restored claim needs, bound to another volume: every plane
// must refuse (ClaimConflict, naming the claim) before it creates any volume.
func (d *run) refusedRestore(ctx context.Context, b *fedv1alpha1.VolumeBackup) (string, error) {
	const tc = "taken"
	ns := b.Name + "-conflict"
	claim := "tikv-" + tc + "-tikv-0"
	for _, dp := range d.Lab().DataPlanes {
		kc := d.Kube()[dp.Cluster]
		if err := env.EnsureNamespace(ctx, kc, ns, d.TenantLevel(ns)); err != nil {
			return "", fmt.Errorf("%s: %w", dp.Cluster, err)
		}
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				VolumeName: "someone-elses-volume",
				Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if err := kc.Create(ctx, pvc); err != nil {
			return "", fmt.Errorf("the conflicting claim in %s: %w", dp.Cluster, err)
		}
	}
	before, err := d.awsStats(ctx)
	if err != nil {
		return "", err
	}
	prevNS, prevTC := d.Options().RestoreNamespace, d.Options().RestoreTCName
	defer func() { d.Options().RestoreNamespace, d.Options().RestoreTCName = prevNS, prevTC }()
	d.Options().RestoreNamespace, d.Options().RestoreTCName = ns, tc
	r, err := d.Restore(ctx, b)
	if err == nil || !errors.Is(err, demo.ErrFailed) {
		return "", fmt.Errorf("restore into %s/%s over the claim %s: %w; want it refused", ns, tc, claim, err)
	}
	if !strings.Contains(err.Error(), dpv1alpha1.RestoreMemberClaimConflictReason) || !strings.Contains(err.Error(), claim) {
		return "", fmt.Errorf("restore refused with %w; want %s naming %s", err, dpv1alpha1.RestoreMemberClaimConflictReason, claim)
	}
	// The restore checked what it restored (verify), so its failure is the backup's verdict.
	verdict := ""
	if err := d.Poll(ctx, "VolumeBackup "+b.Name+" Verified False", func() (bool, string, error) {
		vb := &fedv1alpha1.VolumeBackup{}
		if err := d.Kube()[d.Lab().Control].Get(ctx, client.ObjectKeyFromObject(b), vb); err != nil {
			return false, "", err
		}
		v := meta.FindStatusCondition(vb.Status.Conditions, fedv1alpha1.VolumeBackupVerifiedCondition)
		switch {
		case v == nil:
			return false, "no verdict yet", nil
		case v.Status != metav1.ConditionFalse || v.Reason != fedv1alpha1.VolumeBackupRestoreFailedReason ||
			!strings.Contains(v.Message, dpv1alpha1.RestoreMemberClaimConflictReason):
			return false, "", fmt.Errorf("backup %s Verified %s %s: %s; want False %s naming %s", b.Name, v.Status, v.Reason, v.Message,
				fedv1alpha1.VolumeBackupRestoreFailedReason, dpv1alpha1.RestoreMemberClaimConflictReason)
		}
		verdict = v.Reason
		return true, "", nil
	}); err != nil {
		return "", err
	}
	if err := d.DeleteAndWait(ctx, d.Kube()[d.Lab().Control], r); err != nil {
		return "", err
	}
	if err := d.noVolumesSince(ctx, before, "the refused restore"); err != nil {
		return "", err
	}
	if err := d.DeleteRestored(ctx, ns); err != nil {
		return "", err
	}
	return fmt.Sprintf("a restore over claim %s refused (%s) before any volume was made from a snapshot; the backup's Verified False %s",
		claim, dpv1alpha1.RestoreMemberClaimConflictReason, verdict), nil
}

// failover is ScenarioFailover.
func (d *run) failover(ctx context.Context, name string) (string, error) {
	plane := d.Lab().DataPlanes[len(d.Lab().DataPlanes)-1].Cluster
	c := d.Kube()[plane]
	key := client.ObjectKey{Namespace: d.Options().Namespace, Name: d.Options().TCName}
	tc := &pcv1alpha1.TidbCluster{}
	if err := c.Get(ctx, key, tc); err != nil {
		return "", err
	}
	want := tidbcluster.TiKVPods(tc) + 1
	if len(tc.Status.TiKV.FailureStores) == 0 {
		// The store of the plane's first TiKV, failed over as tidb-operator records it once the
		// store was Down for its tikvFailoverPeriod (the lab's store never went down: the pod
		// came back, and tidb-operator keeps the failover pod until recoverFailover).
		ids := tidbcluster.StoreIDByPod(tc)
		pod := operator.MemberName(tc.Name, operator.ComponentTiKV, 0)
		id := ids[pod]
		if id == "" {
			return "", fmt.Errorf("%s: %s/%s has no store for %s in status.tikv.stores", plane, key.Namespace, key.Name, pod)
		}
		patch := fmt.Sprintf(`{"status":{"tikv":{"failureStores":{%q:{"podName":%q,"storeID":%q,"createdAt":%q}}}}}`,
			id, pod, id, time.Now().UTC().Format(time.RFC3339))
		if err := c.Patch(ctx, tc, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return "", fmt.Errorf("%s: fail store %s over: %w", plane, id, err)
		}
	} else {
		want = tidbcluster.TiKVPods(tc)
	}
	// The lab's operator, as tidb-operator, runs one TiKV pod more; its store joins.
	if err := d.Poll(ctx, fmt.Sprintf("%s: %d TiKV stores up with the failover pod", plane, want), func() (bool, string, error) {
		if err := c.Get(ctx, key, tc); err != nil {
			return false, "", err
		}
		up := tidbcluster.StoresUp(tc)
		return up == want, fmt.Sprintf("%d of %d stores up", up, want), nil
	}); err != nil {
		return "", err
	}
	d.SetSourceTiKV(plane, want)
	b, err := d.Backup(ctx)
	if err != nil {
		return "", err
	}
	if err := d.WaitTransfersAfter(ctx, b); err != nil {
		return "", err
	}
	if err := d.restoreExactly(ctx, b, name+"-restored"); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s backed up with %d TiKV (spec.tikv.replicas %d and a failed-over store) and restored exactly into %d", plane, want,
		tidbcluster.TiKVReplicas(tc), want), nil
}

// noVolumesSince fails when the AWS double made a volume from a snapshot since it counted before:
// what (a refused restore) should have made none.
func (d *run) noVolumesSince(ctx context.Context, before awsdouble.Stats, what string) error {
	after, err := d.awsStats(ctx)
	if err != nil {
		return err
	}
	if n := after.VolumesFromSnapshots - before.VolumesFromSnapshots; n != 0 {
		return fmt.Errorf("%s created %d volumes from the backup's snapshots", what, n)
	}
	return nil
}

// deleteAll deletes a scenario's restore r, the namespace ns it restored into (deleteRestored)
// and its backup b, each waited for.
// restoreExactly restores b into namespace ns of every plane, checks the restored cluster is
// exactly the backup's, and deletes the restore, what it made and b.
func (d *run) restoreExactly(ctx context.Context, b *fedv1alpha1.VolumeBackup, ns string) error {
	prev := *d.Options()
	defer func() { *d.Options() = prev }()
	d.Options().RestoreNamespace = ns
	r, err := d.Restore(ctx, b)
	if err != nil {
		return err
	}
	if err := d.Check(ctx, b, r); err != nil {
		return err
	}
	return d.deleteAll(ctx, r, ns, b)
}

func (d *run) deleteAll(ctx context.Context, r *fedv1alpha1.VolumeRestore, ns string, b *fedv1alpha1.VolumeBackup) error {
	c := d.Kube()[d.Lab().Control]
	if err := d.DeleteAndWait(ctx, c, r); err != nil {
		return err
	}
	if err := d.DeleteRestored(ctx, ns); err != nil {
		return err
	}
	return d.DeleteAndWait(ctx, c, b)
}

// encryptionKey is the KMS key the source's TiKV encrypts with in ScenarioEncrypted.
const encryptionKey = "fedbr-lab-key-a"

// encryptedRefused is ScenarioEncrypted.
func (d *run) encryptedRefused(ctx context.Context, name string) (string, error) {
	config := fmt.Sprintf(`{"spec":{"tikv":{"config":{"security":{"encryption":{"data-encryption-method":"aes256-ctr",`+
		`"master-key":{"type":"kms","key-id":%q,"region":%q}}}}}}}`, encryptionKey, d.Lab().AWS.Region)
	revert, err := d.patchSourceTCs(ctx, []byte(config))
	if err != nil {
		return "", err
	}
	b, err := d.Backup(ctx)
	if rerr := revert(); err == nil {
		err = rerr
	}
	if err != nil {
		return "", err
	}
	before, err := d.awsStats(ctx)
	if err != nil {
		return "", err
	}
	prev := *d.Options()
	defer func() { *d.Options() = prev }()
	d.Options().RestoreNamespace = name + "-restored"
	r, err := d.Restore(ctx, b)
	if err == nil || !errors.Is(err, demo.ErrFailed) {
		return "", fmt.Errorf("restore of the encrypted backup into TiKV without encryption: %w; want it refused", err)
	}
	if !strings.Contains(err.Error(), dpv1alpha1.RestoreMemberEncryptionMismatchReason) || !strings.Contains(err.Error(), encryptionKey) {
		return "", fmt.Errorf("restore refused with %w; want %s naming the key %s", err, dpv1alpha1.RestoreMemberEncryptionMismatchReason, encryptionKey)
	}
	if err := d.deleteAll(ctx, r, d.Options().RestoreNamespace, b); err != nil {
		return "", err
	}
	if err := d.noVolumesSince(ctx, before, "the refused restore"); err != nil {
		return "", err
	}
	return fmt.Sprintf("a backup encrypted with KMS key %s refused (%s) by TiKV without encryption, before any volume was made from a snapshot",
		encryptionKey, dpv1alpha1.RestoreMemberEncryptionMismatchReason), nil
}

// patchSourceTCs merge-patches the source TidbCluster of every data plane and returns what puts
// back each one's spec.tikv.config as it was.
func (d *run) patchSourceTCs(ctx context.Context, patch []byte) (revert func() error, err error) {
	type saved struct {
		c      client.Client
		tc     *pcv1alpha1.TidbCluster
		config []byte
	}
	var done []saved
	revert = func() error {
		var errs []error
		for _, s := range done {
			// A merge patch merges maps: clear the config, then give back the old one.
			patches := []string{`{"spec":{"tikv":{"config":null}}}`}
			if s.config != nil {
				patches = append(patches, `{"spec":{"tikv":{"config":`+string(s.config)+`}}}`)
			}
			for _, p := range patches {
				if err := s.c.Patch(context.WithoutCancel(ctx), s.tc, client.RawPatch(types.MergePatchType, []byte(p))); err != nil {
					errs = append(errs, fmt.Errorf("put back %s/%s's spec.tikv.config: %w", s.tc.Namespace, s.tc.Name, err))
				}
			}
		}
		return errors.Join(errs...)
	}
	for _, dp := range d.Lab().DataPlanes {
		c := d.Kube()[dp.Cluster]
		tc := &pcv1alpha1.TidbCluster{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: d.Options().Namespace, Name: d.Options().TCName}, tc); err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w", dp.Cluster, err), revert())
		}
		var old []byte
		if tc.Spec.TiKV != nil && tc.Spec.TiKV.Config != nil {
			old = slices.Clone(tc.Spec.TiKV.Config.Raw)
		}
		if err := c.Patch(ctx, tc, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return nil, errors.Join(fmt.Errorf("%s: patch %s/%s: %w", dp.Cluster, tc.Namespace, tc.Name, err), revert())
		}
		done = append(done, saved{c: c, tc: tc, config: old})
	}
	return revert, nil
}

// toleratedOutage takes a backup and restores it with tolerateSingleTiKVOutage into a cluster
// whose second plane's TiKV 1 never starts: restore-data goes on with the other stores, the
// Restore completes, and the restored cluster is exact.
func (d *run) toleratedOutage(ctx context.Context, name string) (string, error) {
	b, err := d.Backup(ctx)
	if err != nil {
		return "", err
	}
	if err := d.WaitTransfersAfter(ctx, b); err != nil {
		return "", err
	}
	down := d.Lab().DataPlanes[min(1, len(d.Lab().DataPlanes)-1)].Cluster
	prev := *d.Options()
	defer func() { *d.Options() = prev }()
	d.Options().RestoreNamespace, d.Options().RestoreTolerateOutage, d.Options().RestoreDownTiKV = name+"-restored", true, map[string]string{down: "1"}
	r, err := d.Restore(ctx, b)
	if err != nil {
		return "", err
	}
	var tc pcv1alpha1.TidbCluster
	if err := d.Kube()[down].Get(ctx, client.ObjectKey{Namespace: d.Options().RestoreNamespace, Name: d.Options().RestoreTCName}, &tc); err != nil {
		return "", err
	}
	if up, want := tidbcluster.StoresUp(&tc), tidbcluster.TiKVReplicas(&tc); up != want-1 {
		return "", fmt.Errorf("%s has %d of %d stores up after the restore; the scenario needs exactly one down", down, up, want)
	}
	if err := d.Check(ctx, b, r); err != nil {
		return "", err
	}
	if err := d.deleteAll(ctx, r, d.Options().RestoreNamespace, b); err != nil {
		return "", err
	}
	return fmt.Sprintf("restored exactly with TiKV 1 of %s down", down), nil
}

// scratch is ScenarioScratch.
func (d *run) scratch(ctx context.Context, name string) (string, error) {
	b, err := d.Backup(ctx)
	if err != nil {
		return "", err
	}
	if err := d.WaitTransfersAfter(ctx, b); err != nil {
		return "", err
	}
	prev := *d.Options()
	defer func() { *d.Options() = prev }()
	ns := name + "-scratch"
	d.Options().RestoreNamespace, d.Options().RestoreScratch = ns, true
	r, err := d.Restore(ctx, b)
	if err != nil {
		return "", err
	}
	if err := d.Check(ctx, b, r); err != nil {
		return "", err
	}
	c := d.Kube()[d.Lab().Control]
	if err := d.DeleteAndWait(ctx, c, r); err != nil {
		return "", err
	}
	released, err := d.RemoveScratch(ctx, ns, 1)
	if err != nil {
		return "", err
	}
	failed, err := d.scratchOfABrokenBackup(ctx, b, name+"-broken")
	if err != nil {
		return "", err
	}
	if err := d.DeleteAndWait(ctx, c, b); err != nil {
		return "", err
	}
	return fmt.Sprintf("restored exactly into the TidbClusters it made; its deletion removed them, their claims and volumes (%d PD volumes released to reclaim Delete); %s", released, failed), nil
}

// scratchOfABrokenBackup removes the saved TidbCluster from the first plane's backupmeta of b
// (as a tampered or damaged metadata would be) and restores b as a scratch restore with verify
// into ns: that plane's tidbcluster step must fail the restore (SavedTidbClusterFailed), the
// backup must then be Verified False RestoreFailed naming it, and the failed restore's deletion
// must leave nothing of what the other planes' agents made meanwhile.
func (d *run) scratchOfABrokenBackup(ctx context.Context, b *fedv1alpha1.VolumeBackup, ns string) (string, error) {
	plane := d.Lab().DataPlanes[0].Cluster
	path := filepath.Join(d.Lab().AWS.Dir, "s3", demo.Bucket, "objects", filepath.FromSlash(b.Spec.Template.MemberStorage(plane).S3.Prefix), brmeta.BackupMetaKey)
	raw, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	k8s, _ := doc["kubernetes"].(map[string]any)
	if k8s == nil || k8s["crd_tidb_cluster"] == nil {
		return "", fmt.Errorf("%s saved no TidbCluster to take away", path)
	}
	delete(k8s, "crd_tidb_cluster")
	broken, err := json.Marshal(doc)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, broken, 0o644); err != nil {
		return "", err
	}
	defer func() { _ = os.WriteFile(path, raw, 0o644) }()
	prev := *d.Options()
	defer func() { *d.Options() = prev }()
	d.Options().RestoreNamespace, d.Options().RestoreScratch = ns, true
	r, err := d.Restore(ctx, b)
	switch {
	case err == nil:
		return "", fmt.Errorf("a scratch restore of a backup whose %s metadata saved no TidbCluster completed; want it failed with %s", plane,
			dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason)
	case !strings.Contains(err.Error(), dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason):
		return "", fmt.Errorf("a scratch restore of a backup whose %s metadata saved no TidbCluster: %w; want it failed with %s", plane, err,
			dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason)
	}
	c := d.Kube()[d.Lab().Control]
	err = d.Poll(ctx, b.Name+" Verified False by the failed drill", func() (bool, string, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
			return false, "", err
		}
		v := meta.FindStatusCondition(b.Status.Conditions, fedv1alpha1.VolumeBackupVerifiedCondition)
		ok := v != nil && v.Status == metav1.ConditionFalse && v.Reason == fedv1alpha1.VolumeBackupRestoreFailedReason &&
			b.Status.Verification != nil && b.Status.Verification.Restore == r.Name && strings.Contains(v.Message, dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason)
		return ok, fmt.Sprintf("%+v", v), nil
	})
	if err != nil {
		return "", err
	}
	if err := d.DeleteAndWait(ctx, c, r); err != nil {
		return "", err
	}
	if _, err := d.RemoveScratch(ctx, ns, 0); err != nil {
		return "", err
	}
	return fmt.Sprintf("a scratch restore of it with %s's saved TidbCluster taken away failed (%s), the backup Verified False %s, nothing left",
		plane, dpv1alpha1.RestoreMemberSavedTidbClusterFailedReason, fedv1alpha1.VolumeBackupRestoreFailedReason), nil
}

// drills is ScenarioDrills.
func (d *run) drills(ctx context.Context, name string) (string, error) {
	c := d.Kube()[d.Lab().Control]
	ns := name + "-drill"
	if err := d.PrepareScratch(ctx, ns); err != nil {
		return "", err
	}
	s := &fedv1alpha1.VolumeBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: demo.ControlNamespace}}
	s.Spec.Schedule = "* * * * *"
	s.Spec.MaxBackups = ptr.To[int32](2)
	s.Spec.BackupTemplate = d.NewBackup(name).Spec
	s.Spec.Verify = &fedv1alpha1.ScheduleVerify{Namespace: ns, Timeout: &metav1.Duration{Duration: 4 * time.Minute}}
	if err := c.Create(ctx, s); err != nil {
		return "", fmt.Errorf("create VolumeBackupSchedule: %w", err)
	}
	d.Say("  VolumeBackupSchedule default/%s: every minute, maxBackups 2, every backup drilled into %s", name, ns)
	// The first drill: its backup Verified by it.
	var drilled *fedv1alpha1.VolumeBackup
	err := d.PollFor(ctx, 6*time.Minute, "a backup of "+name+" verified by its drill", func() (bool, string, error) {
		var list fedv1alpha1.VolumeBackupList
		if err := c.List(ctx, &list, client.InNamespace(demo.ControlNamespace), client.MatchingLabels{volumebackupschedule.ScheduleLabel: name}); err != nil {
			return false, "", err
		}
		var state []string
		for i := range list.Items {
			b := &list.Items[i]
			v := b.Status.Verification
			switch {
			case b.Status.Phase == fedv1alpha1.VolumeBackupFailed:
				return false, "", fmt.Errorf("scheduled backup %s failed: %s", b.Name, demo.ConditionMessage(b.Status.Conditions, fedv1alpha1.VolumeBackupFailedCondition))
			case v != nil && v.Restore == volumebackupschedule.DrillName(b.Name):
				if !meta.IsStatusConditionTrue(b.Status.Conditions, fedv1alpha1.VolumeBackupVerifiedCondition) {
					return false, "", fmt.Errorf("backup %s: its drill %s judged it %s", b.Name, v.Restore,
						demo.ConditionMessage(b.Status.Conditions, fedv1alpha1.VolumeBackupVerifiedCondition))
				}
				drilled = b.DeepCopy()
				return true, "", nil
			}
			state = append(state, b.Name+" "+string(b.Status.Phase))
		}
		return false, fmt.Sprintf("%v", state), nil
	})
	if err != nil {
		return "", err
	}
	d.Say("  %s verified by its drill %s, recovery time %s", drilled.Name, drilled.Status.Verification.Restore, drilled.Status.Verification.TimeTaken)
	// The judged drill is deleted by the schedule, and the next drill (one at a time) starts only
	// once it is gone: wait for the drill of a later backup to run.
	drills := func() ([]fedv1alpha1.VolumeRestore, error) {
		var list fedv1alpha1.VolumeRestoreList
		err := c.List(ctx, &list, client.InNamespace(demo.ControlNamespace), client.MatchingLabels{volumebackupschedule.DrillLabel: name})
		return list.Items, err
	}
	var second string
	err = d.PollFor(ctx, 4*time.Minute, "the next drill of "+name, func() (bool, string, error) {
		list, err := drills()
		if err != nil {
			return false, "", err
		}
		var seen []string
		for _, r := range list {
			if r.Name != drilled.Status.Verification.Restore && r.DeletionTimestamp == nil {
				second = r.Name
				return true, "", nil
			}
			seen = append(seen, r.Name)
		}
		return false, fmt.Sprintf("drills %v", seen), nil
	})
	if err != nil {
		return "", err
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(s), s); err != nil {
		return "", err
	}
	if l := s.Status.LastDrill; l == nil || l.Restore != second {
		return "", fmt.Errorf("schedule %s: status.lastDrill %+v, want its running drill %s", name, l, second)
	}
	if cond := meta.FindStatusCondition(s.Status.Conditions, fedv1alpha1.VolumeBackupScheduleDrillCondition); cond == nil || cond.Status != metav1.ConditionTrue {
		return "", fmt.Errorf("schedule %s: condition Drill %+v", name, cond)
	}
	// The schedule deleted mid-drill: its drill goes with it (owner reference), and the drill's
	// agents remove what it made.
	if err := d.DeleteAndWait(ctx, c, s); err != nil {
		return "", err
	}
	err = d.Poll(ctx, "the drills of "+name+" gone with it", func() (bool, string, error) {
		list, err := drills()
		if err != nil {
			return false, "", err
		}
		var left []string
		for _, r := range list {
			left = append(left, r.Name+" "+string(r.Status.Phase))
		}
		return len(list) == 0, fmt.Sprintf("%v", left), nil
	})
	if err != nil {
		return "", err
	}
	released, err := d.RemoveScratch(ctx, ns, 1)
	if err != nil {
		return "", err
	}
	var list fedv1alpha1.VolumeBackupList
	if err := c.List(ctx, &list, client.InNamespace(demo.ControlNamespace), client.MatchingLabels{volumebackupschedule.ScheduleLabel: name}); err != nil {
		return "", err
	}
	for i := range list.Items {
		if err := d.DeleteAndWait(ctx, c, &list.Items[i]); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%s verified by its drill %s (recovery time %s), deleted once judged; the schedule deleted during the next drill %s, which went with it; nothing of either left (%d PD volumes released to reclaim Delete)",
		drilled.Name, drilled.Status.Verification.Restore, drilled.Status.Verification.TimeTaken, second, released), nil
}

// run is this suite's view of the demo's harness (demo.Harness): the suite's own steps are its
// methods.
type run struct{ *demo.Harness }

func newRun(ctx context.Context, o demo.Options) (*run, error) {
	h, err := demo.NewHarness(ctx, o)
	if err != nil {
		return nil, err
	}
	return &run{h}, nil
}
