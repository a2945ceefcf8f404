// Package demo runs fedbr's main job end to end in a running lab (internal/lab/env): one TiDB
// cluster spread over every data plane with a bank workload writing to it, a VolumeBackup taken
// while it writes, a VolumeRestore into fresh TidbClusters in recovery mode, and the bank's
// checker on the restored cluster at the backup's commit ts. `fedbr-lab lab demo` and the e2e test
// both run it: one implementation, so what the test proves is what the demo shows.
//
// Everything in between is production code in production shape: the manager and one agent per
// data plane run as their own processes (`fedbr manager`, `fedbr agent`), the agents run their
// steps as Kubernetes Jobs on the lab's nodes, and those Jobs talk to the AWS double and the TiDB
// doubles over the real protocols. The demo only creates the objects an SRE would create and
// watches their status.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/lab/env"
)

// Options shape a demo run.
type Options struct {
	// Lab is the running lab.
	Lab *env.Lab
	// Fedbr is the fedbr binary to run the manager and agents with (default: the lab's).
	Fedbr string
	// Namespace is where the source TidbClusters live in each data plane; RestoreNamespace where
	// the fresh ones are created.
	Namespace, RestoreNamespace string
	// TCName names the TidbClusters; RestoreTCName the fresh ones a restore goes to (default
	// TCName).
	TCName, RestoreTCName string
	// TiKVPerPlane is the number of TiKV stores in each data plane.
	TiKVPerPlane int
	// RaftVolumes gives each TiKV a second volume for its raft log (spec.tikv.storageVolumes
	// "raft"), snapshotted with its data volume in one call. A warm-up reads it block by block
	// (every strategy), through the device a lab node shows a privileged pod (blockWarmup).
	RaftVolumes bool
	// Accounts, Workers and Rate shape the bank workload (Rate 0: as fast as it goes).
	Accounts, Workers int
	Rate              float64
	// Warmup is how long the bank runs, once it committed bank.MinTransfers transfers, before
	// the backup starts.
	Warmup time.Duration
	// RestoreWarmup is the restore's warm-up of its volumes: "" (none), sync or async.
	RestoreWarmup fedv1alpha1.RestoreWarmupMode
	// RestoreWarmupStrategy is the restore's warmupStrategy ("" is hybrid): hybrid, fio or
	// check-wal-only (fsr is refused). A warm-up that reads a block device (fio, or a raft
	// volume under any strategy) reads the device a lab node shows a privileged pod for the
	// volume (docs/lab.md); the demo then starts the agents with --allow-privileged-warmup.
	RestoreWarmupStrategy fedv1alpha1.RestoreWarmupStrategy
	// Timeout bounds each wait (cluster ready, backup, restore).
	Timeout time.Duration
	// CleanPolicy of the backup; the demo deletes the backup at the end and checks what is left.
	KeepBackup bool
	// Out receives progress lines.
	Out io.Writer
	// AgentArgs are added to every `fedbr agent` command line.
	AgentArgs []string
	// Install installs fedbr through its Helm charts (env.Install: Deployments in namespace
	// fedbr-system under the restricted Pod Security Standard) instead of running the manager
	// and the agents as processes of the demo. The crash suite then kills the Deployments'
	// containers, which the lab's kubelet restarts, instead of processes of its own.
	Install bool
	// RestoreTolerateOutage sets the restore's tolerateSingleTiKVOutage; RestoreDownTiKV keeps
	// TiKV ordinals of the restored TidbCluster down, by data plane (the lab operator's
	// lab.fedbr.io/down-tikv: their node is lost).
	RestoreTolerateOutage bool
	RestoreDownTiKV       map[string]string
	// RestoreMeta gives the VolumeRestore labels and annotations.
	RestoreMeta metav1.ObjectMeta
	// TLS runs the TiDB clusters with spec.tlsCluster enabled: a lab CA (labtls), the
	// Secrets a tidb-operator user creates (<tc>-cluster-client-secret,
	// <tc>-pd-cluster-secret, <tc>-tikv-cluster-secret) in both namespaces, PD and TiKV serving
	// mutual TLS (the lab operator), and the demo's own bank and checks dialing with the client
	// certificate. The report's StepTLS says whether every PD/TiKV-dialing step pod carried
	// --ca.
	TLS bool
	// RestoreUserCheck gives the restore a user's check (spec.template.check): the bank checker
	// as a Job in the data member's plane, image fedbr (`fedbr-lab lab bank check` against the
	// restored PD at the restored ts, reading the bank's log the demo writes to a file). Not
	// with TLS: the bank command dials PD in plain text.
	RestoreUserCheck bool
	// RestoreScratch makes the restore a scratch restore (spec.template.scratch): the demo only
	// prepares RestoreNamespace (in each plane the restore address block as the namespace's
	// lab.fedbr.io/ip-prefix, for the operator to give the TidbClusters it has not seen yet, and
	// with TLS the Secrets), and the agents make the TidbClusters from the ones the backup saved.
	RestoreScratch bool
}

// WithDefaults is o with every unset field at its default.
func (o Options) WithDefaults() Options {
	if o.Fedbr == "" {
		o.Fedbr = o.Lab.Fedbr
	}
	if o.Namespace == "" {
		o.Namespace = "tidb"
	}
	if o.RestoreNamespace == "" {
		o.RestoreNamespace = "tidb-restored"
	}
	if o.TCName == "" {
		o.TCName = "basic"
	}
	if o.RestoreTCName == "" {
		o.RestoreTCName = o.TCName
	}
	if o.TiKVPerPlane <= 0 {
		o.TiKVPerPlane = 3
	}
	if o.Accounts <= 0 {
		o.Accounts = 200
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Warmup <= 0 {
		o.Warmup = 3 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return o
}

// Validate reports options that cannot run.
func (o Options) Validate() error {
	switch {
	case o.Lab == nil:
		return errors.New("no lab: run `fedbr-lab lab up` first")
	case len(o.Lab.DataPlanes) == 0:
		return errors.New("the lab has no data plane")
	case o.Rate < 0:
		return fmt.Errorf("bank rate %v: want >= 0", o.Rate)
	case o.RestoreWarmup != fedv1alpha1.RestoreWarmupNone && o.RestoreWarmup != fedv1alpha1.RestoreWarmupSync && o.RestoreWarmup != fedv1alpha1.RestoreWarmupAsync:
		return fmt.Errorf("restore warm-up %q: want sync, async or none", o.RestoreWarmup)
	case o.RestoreWarmupStrategy != "" && o.RestoreWarmup == fedv1alpha1.RestoreWarmupNone:
		return fmt.Errorf("restore warm-up strategy %q without a warm-up mode: set RestoreWarmup too", o.RestoreWarmupStrategy)
	case o.RestoreWarmupStrategy == fedv1alpha1.RestoreWarmupStrategyFsr:
		return fmt.Errorf("restore warm-up strategy %q is not run in the lab (its fast snapshot restores are not exercised end to end); use hybrid, fio or check-wal-only", o.RestoreWarmupStrategy)
	case o.RestoreWarmupStrategy != "" && o.RestoreWarmupStrategy != fedv1alpha1.RestoreWarmupStrategyHybrid &&
		o.RestoreWarmupStrategy != fedv1alpha1.RestoreWarmupStrategyFio && o.RestoreWarmupStrategy != fedv1alpha1.RestoreWarmupStrategyCheckWALOnly:
		return fmt.Errorf("restore warm-up strategy %q: want hybrid, fio or check-wal-only", o.RestoreWarmupStrategy)
	case o.Namespace == o.RestoreNamespace && o.Namespace != "":
		return fmt.Errorf("restore namespace %q must differ from the source namespace", o.RestoreNamespace)
	}
	return nil
}

// blockWarmup is whether the restore's warm-up reads a block device, which the agents must
// allow (--allow-privileged-warmup): the agents' policy decides it.
func (o Options) blockWarmup() bool {
	var other []string
	if o.RaftVolumes {
		other = []string{"raft"}
	}
	return o.RestoreWarmup != fedv1alpha1.RestoreWarmupNone && policy.WarmupReadsBlocks(o.RestoreWarmupStrategy, other) != ""
}

// Run runs the demo and returns its report. The error is nil only if the backup and the
// restore completed and the checker found the restored cluster exactly as of the backup's
// commit ts; the report says as much as was measured either way.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.WithDefaults()
	d, err := NewHarness(ctx, o)
	if err != nil {
		return nil, err
	}
	defer d.Stop()
	err = d.run(ctx)
	d.report.Err = err
	return d.report, err
}

// logDir is where the demo's own processes log.
func logDir(l *env.Lab) string { return filepath.Join(l.Dir, "demo") }

func ensureDir(p string) error { return os.MkdirAll(p, 0o755) }
