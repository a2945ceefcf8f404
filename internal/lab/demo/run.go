package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/lab/labbr"
	"github.com/fedbr/fedbr/internal/lab/labtls"
	"github.com/fedbr/fedbr/internal/lab/operator"
	"github.com/fedbr/fedbr/internal/tidb"
)

// Bucket is the S3 bucket (in the AWS double) backups go to.
const Bucket = "fedbr-demo"

// Harness is one demo in progress: the lab, its clients and controllers, the source cluster and
// its bank. The demo, the crash suite (test/crash) and the day-2 scenarios (test/daytwo) drive it.
type Harness struct {
	o     Options
	lab   *env.Lab
	kube  map[string]client.Client // by context
	aws   *aws.Provider
	procs []*process
	// ctrls are the controllers by name ("manager", "agent-<plane>"): their index in procs and
	// how to start them again.
	ctrls map[string]controller
	// crashBefore are the volumes that existed when a crash suite started.
	crashBefore map[string]bool
	// sourceTiKV are the source cluster's TiKV pods in a plane where they are not
	// Options.TiKVPerPlane (a failed-over store's pod: ScenarioFailover), by plane: a restore's
	// TidbCluster there needs as many TiKV.
	sourceTiKV map[string]int
	report     *Report
	started    time.Time

	// tlsSet is the lab's CA with Options.TLS (nil without); tls the demo's client side of it.
	tlsSet *labtls.Set
	tls    *tidb.TLS

	// seen are the dialing step pods seen in the data planes (recordStepPods), by
	// plane/namespace/name: teardown deletes the step Jobs, and their pods, before the demo
	// counts them.
	seenMu sync.Mutex
	seen   map[string]seenPod
	// writes are the backup members' writes (watchBackupMembers).
	writes *memberWrites
	// backupCreated is when the demo created its VolumeBackup.
	backupCreated time.Time

	bankMu   sync.Mutex
	bankCfg  bank.Config
	bankLog  *bank.Log
	bankStop context.CancelFunc
	bankDone chan bank.Stats
}

// Lab is the lab the harness runs in.
func (d *Harness) Lab() *env.Lab { return d.lab }

// Kube are the clients of the lab's clusters, by kubeconfig context.
func (d *Harness) Kube() map[string]client.Client { return d.kube }

// AWS is the provider over the lab's AWS double.
func (d *Harness) AWS() *aws.Provider { return d.aws }

// Options are the harness's options, its defaults filled in. A scenario may change the
// restore's (RestoreNamespace, RestoreTCName, RestoreMeta, …) before Restore.
func (d *Harness) Options() *Options { return &d.o }

// TLS is the client side of the lab's CA (Options.TLS), nil without.
func (d *Harness) TLS() *tidb.TLS { return d.tls }

// SetSourceTiKV records that the source cluster runs n TiKV pods in plane (a failed-over
// store's extra pod): a restore's TidbCluster there gets as many.
func (d *Harness) SetSourceTiKV(plane string, n int) {
	if d.sourceTiKV == nil {
		d.sourceTiKV = map[string]int{}
	}
	d.sourceTiKV[plane] = n
}

func NewHarness(ctx context.Context, o Options) (*Harness, error) {
	d := &Harness{o: o, lab: o.Lab, kube: map[string]client.Client{}, report: &Report{}, started: time.Now(), bankLog: &bank.Log{}}
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, fedv1alpha1.AddToScheme, dpv1alpha1.AddToScheme, pcv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	raw, err := clientcmd.LoadFromFile(d.lab.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("lab kubeconfig: %w", err)
	}
	for name := range raw.Contexts {
		cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
		if err != nil {
			return nil, err
		}
		c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, fmt.Errorf("client for %s: %w", name, err)
		}
		d.kube[name] = c
	}
	if d.kube[d.lab.Control] == nil {
		return nil, fmt.Errorf("the lab kubeconfig has no context %q for the control plane", d.lab.Control)
	}
	if o.TLS {
		if err := d.setupTLS(); err != nil {
			return nil, err
		}
	}
	d.aws, err = aws.New(ctx, aws.Config{Region: d.lab.AWS.Region, Endpoint: d.lab.AWS.Endpoint, AWS: awsdouble.Config(d.lab.AWS.Region),
		PollInterval: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Harness) Say(format string, args ...any) {
	_, _ = fmt.Fprintf(d.o.Out, "[%6.1fs] %s\n", time.Since(d.started).Seconds(), fmt.Sprintf(format, args...))
}

func (d *Harness) run(ctx context.Context) error {
	d.recordStepPods(ctx)
	d.watchBackupMembers(ctx)
	if err := d.StartSuite(ctx); err != nil {
		return err
	}
	d.Say("bank: %d accounts, %d workers, %d transfers committed; backing up in %s, while it writes", d.o.Accounts, d.o.Workers, bank.MinTransfers, d.o.Warmup)
	select {
	case <-time.After(d.o.Warmup):
	case <-ctx.Done():
		return ctx.Err()
	}
	b, err := d.Backup(ctx)
	if err == nil {
		err = d.WaitTransfersAfter(ctx, b)
	}
	d.stopBank()
	if err != nil {
		return err
	}
	if err := d.CheckLifted(ctx); err != nil {
		return err
	}
	r, err := d.Restore(ctx, b)
	if err != nil {
		return err
	}
	if err := d.Check(ctx, b, r); err != nil {
		return err
	}
	if err := d.stepTLS(ctx); err != nil {
		return err
	}
	if err := d.sizes(ctx, b); err != nil {
		return err
	}
	if err := d.describe(ctx, b, r); err != nil {
		return err
	}
	if d.o.KeepBackup {
		return nil
	}
	return d.deleteBackup(ctx, b)
}

// startControllers runs `fedbr manager` and one `fedbr agent` per data plane: as processes, or
// with Options.Install as the Deployments of fedbr's charts (env.Install).
func (d *Harness) startControllers(ctx context.Context) error {
	if d.o.Install {
		err := env.Install(ctx, d.lab, env.InstallOptions{AllowNamespaces: []string{d.namespaceMapping()},
			PrivilegedWarmup: d.o.blockWarmup(), AgentArgs: d.o.AgentArgs,
			Log: func(format string, args ...any) { d.Say("install: "+format, args...) }})
		if err != nil {
			return fmt.Errorf("install fedbr through its charts: %w", err)
		}
		d.Say("fedbr installed through its charts: the manager and %d agents run as pods (`fedbr-lab lab logs`)", len(d.lab.DataPlanes))
		return nil
	}
	kc := d.lab.Kubeconfig
	mgr := []string{"manager", "--kubeconfig", kc, "--control-kubeconfig", kc, "--control-context", d.lab.Control,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--probe-interval", "1s", "--log-development", "--v", "1"}
	d.ctrls = map[string]controller{}
	if err := d.startController("manager", mgr); err != nil {
		return err
	}
	for _, dp := range d.lab.DataPlanes {
		args := []string{"agent", "--kubeconfig", kc, "--context", dp.Cluster, "--k8s-cluster-name", dp.Cluster,
			"--image", "fedbr", "--aws-endpoint", d.lab.AWS.Endpoint, "--region", d.lab.AWS.Region,
			"--allow-namespaces", d.namespaceMapping(),
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--v", "1"}
		if d.o.blockWarmup() {
			args = append(args, "--allow-privileged-warmup")
		}
		args = append(args, d.o.AgentArgs...)
		if err := d.startController("agent-"+dp.Cluster, args); err != nil {
			return err
		}
	}
	d.Say("manager and %d agents started (logs in %s)", len(d.lab.DataPlanes), logDir(d.lab))
	return nil
}

// ControlNamespace holds the demo's VolumeBackups and VolumeRestores in the control plane;
// CrashNamespace names the namespace the crash suite restores point n into; DayTwoName names
// day-2 scenario n's objects, and the namespaces it restores into start with it.
const (
	ControlNamespace = "default"
	CrashNamespace   = "crash-%v"
	DayTwoName       = "day2-%v"
)

// namespaceMapping is the agents' --allow-namespaces: the demo's VolumeBackups and
// VolumeRestores live in the control plane's namespace default and act on the source and
// restore namespaces of the data planes, the crash suite's restores on crash-<n>
// (CrashNamespace), and the day-2 suite's on day2-<n>-… (DayTwoName). Nothing else the agent's policy allows by default is widened: the lab's
// members run the agent's own image as fedbr-br, with an S3 storage, and a privileged warm-up
// only when the demo's warm-up reads block devices (Options.blockWarmup).
func (d *Harness) namespaceMapping() string {
	return ControlNamespace + "=" + d.o.Namespace + "," + d.o.RestoreNamespace + "," + fmt.Sprintf(CrashNamespace, "*") + "," +
		fmt.Sprintf(DayTwoName, "*")
}

// controller is one controller process the demo runs.
type controller struct {
	args []string
	// proc indexes d.procs.
	proc int
}

// startController starts the controller name (its log is <name>.log, appended across restarts).
func (d *Harness) startController(name string, args []string) error {
	p, err := start(d.o.Fedbr, filepath.Join(logDir(d.lab), name+".log"), args...)
	if err != nil {
		return err
	}
	d.ctrls[name] = controller{args: args, proc: len(d.procs)}
	d.procs = append(d.procs, p)
	return nil
}

func (d *Harness) Stop() {
	d.stopBank()
	for i := len(d.procs) - 1; i >= 0; i-- {
		d.procs[i].stop(10 * time.Second)
	}
}

// sourceCluster creates the TiDB cluster to back up and waits until every store is up.
func (d *Harness) sourceCluster(ctx context.Context) error {
	n := d.o.TiKVPerPlane * len(d.lab.DataPlanes)
	var split []string
	for _, k := range bank.SplitKeys(d.o.Accounts, 2*n) {
		split = append(split, string(k))
	}
	tcs := env.FederatedTidbClusters(d.lab, d.o.TCName, d.o.Namespace, d.o.TiKVPerPlane, d.o.RaftVolumes, split)
	if err := d.CreateTCs(ctx, d.o.Namespace, tcs); err != nil {
		return err
	}
	d.Say("TiDB cluster %s/%s: %d TiKV over %d data planes, waiting for every store", d.o.Namespace, d.o.TCName, n, len(d.lab.DataPlanes))
	return d.waitStores(ctx, d.o.Namespace, tcs)
}

// TenantLevel is the Pod Security Standard of a namespace of the demo's TiDB clusters:
// restricted, which the stand-in operator's pods and every step pod fedbr creates pass; a
// restore's namespace is privileged when its warm-up reads block devices (privileged pods).
func (d *Harness) TenantLevel(name string) string {
	if d.o.blockWarmup() && name != d.o.Namespace {
		return "privileged"
	}
	return "restricted"
}

func (d *Harness) CreateTCs(ctx context.Context, ns string, tcs map[string]*pcv1alpha1.TidbCluster) error {
	for cluster, tc := range tcs {
		c := d.kube[cluster]
		level := d.TenantLevel(ns)
		if err := env.EnsureNamespace(ctx, c, ns, level); err != nil {
			return fmt.Errorf("%s: %w", cluster, err)
		}
		// The negative control of the label: every step pod admitted there passed restricted.
		if level == "restricted" {
			if err := env.CheckEnforced(ctx, c, ns, d.o.Timeout); err != nil {
				return fmt.Errorf("%s: %w", cluster, err)
			}
		}
		if err := d.withTLS(ctx, cluster, tc); err != nil {
			return err
		}
		if err := c.Create(ctx, tc); err != nil {
			return fmt.Errorf("TidbCluster %s/%s in %s: %w", ns, tc.Name, cluster, err)
		}
	}
	return nil
}

// waitStores waits until every TidbCluster reports all its TiKV stores Up.
func (d *Harness) waitStores(ctx context.Context, ns string, tcs map[string]*pcv1alpha1.TidbCluster) error {
	return d.Poll(ctx, "TiKV stores up in "+ns, func() (bool, string, error) {
		waiting, err := env.StoresWaiting(ctx, d.kube, tcs)
		return waiting == "", waiting, err
	})
}

// Poll calls f until it is done, printing its state when it changes, within the timeout.
func (d *Harness) Poll(ctx context.Context, what string, f func() (bool, string, error)) error {
	return d.PollFor(ctx, d.o.Timeout, what, f)
}

// PollFor is poll within timeout.
func (d *Harness) PollFor(ctx context.Context, timeout time.Duration, what string, f func() (bool, string, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		done, state, err := f()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		if state != last && state != "" {
			d.Say("  %s", state)
			last = state
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not done within %s (last: %s): %w", what, timeout, last, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (d *Harness) pdClient(ctx context.Context, addr string) (*bank.Client, error) {
	return bank.NewClientTLS(ctx, []string{strings.TrimPrefix(addr, "http://")}, d.tls)
}

func (d *Harness) startBank(ctx context.Context) error {
	c, err := d.pdClient(ctx, d.lab.DataPlanes[0].PDAddress())
	if err != nil {
		return err
	}
	d.bankCfg = bank.Config{Accounts: d.o.Accounts, Initial: 1000}
	if err := bank.Load(ctx, c, d.bankCfg, d.bankLog); err != nil {
		c.Close()
		return fmt.Errorf("bank load: %w", err)
	}
	bctx, cancel := context.WithCancel(ctx)
	d.bankStop = cancel
	d.bankDone = make(chan bank.Stats, 1)
	go func() {
		defer c.Close()
		d.bankDone <- bank.Run(bctx, c, d.bankCfg, d.bankLog, d.o.Workers, d.o.Rate, uint64(time.Now().UnixNano()))
	}()
	return nil
}

func (d *Harness) stopBank() {
	d.bankMu.Lock()
	defer d.bankMu.Unlock()
	if d.bankStop == nil {
		return
	}
	d.bankStop()
	d.bankStop = nil
	st := <-d.bankDone
	d.report.Bank = st
	d.Say("bank stopped: %d transfers committed (%.0f/s), %d conflicts, %d of unknown outcome, %d failed",
		st.Committed, float64(st.Committed)/st.Elapsed.Seconds(), st.Conflicts, st.Unknown, st.Failed)
}

// waitTransfers waits, within the timeout, until the bank has committed bank.MinTransfers
// transfers after ts: before the backup (ts 0, and then until PD's min resolved ts passed them)
// and after its commit ts, so that the checker has enough on each side of it.
func (d *Harness) waitTransfers(ctx context.Context, ts uint64) error {
	ctx, cancel := context.WithTimeout(ctx, d.o.Timeout)
	defer cancel()
	last, err := d.bankLog.WaitAfter(ctx, ts, bank.MinTransfers)
	if err != nil {
		return fmt.Errorf("bank: %w", err)
	}
	if ts != 0 {
		return nil
	}
	// A backup pins PD's min resolved ts, which trails the newest commits: only once it has
	// passed the last of these transfers does a backup started now have them before its ts.
	h, err := d.tls.NewPDHTTPClient("fedbr-lab-demo", []string{d.lab.DataPlanes[0].PDAddress()})
	if err != nil {
		return err
	}
	defer h.Close()
	if _, err := labbr.WaitResolved(ctx, h, last); err != nil {
		return fmt.Errorf("bank: the first %d transfers committed, but PD's %w", bank.MinTransfers, err)
	}
	return nil
}

// WaitTransfersAfter waits until the bank has committed bank.MinTransfers transfers after the
// backup's commit ts.
func (d *Harness) WaitTransfersAfter(ctx context.Context, b *fedv1alpha1.VolumeBackup) error {
	ts, err := parseCommitTS("VolumeBackup", b.Name, b.Status.CommitTs)
	if err != nil {
		return err
	}
	if err := d.waitTransfers(ctx, ts); err != nil {
		return err
	}
	d.Say("bank: %d transfers committed after the backup's commit ts %d", bank.MinTransfers, ts)
	return nil
}

// parseCommitTS parses a status commitTs (decimal TSO).
func parseCommitTS(kind, name, s string) (uint64, error) {
	ts, err := strconv.ParseUint(s, 10, 64)
	if err != nil || ts == 0 {
		return 0, fmt.Errorf("%s %s: status commitTs %q is no ts", kind, name, s)
	}
	return ts, nil
}

// Check runs the bank checker on the restored cluster at the backup's commit ts, as the
// VolumeBackup in the control plane states it (not the restore's, which must equal it: a restore
// reporting the ts it flashed back to would otherwise grade itself).
func (d *Harness) Check(ctx context.Context, b *fedv1alpha1.VolumeBackup, r *fedv1alpha1.VolumeRestore) error {
	if err := d.kube[d.lab.Control].Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
		return fmt.Errorf("read VolumeBackup %s: %w", b.Name, err)
	}
	ts, err := parseCommitTS("VolumeBackup", b.Name, b.Status.CommitTs)
	if err != nil {
		return err
	}
	d.report.CheckedTS = ts
	if rts, err := parseCommitTS("VolumeRestore", r.Name, r.Status.CommitTs); err != nil || rts != ts {
		err := fmt.Errorf("VolumeRestore %s restored to commit ts %q, but VolumeBackup %s is consistent at %d: the restore must restore the backup's ts",
			r.Name, r.Status.CommitTs, b.Name, ts)
		d.report.Checker = err.Error()
		return err
	}
	prefix, err := env.RestoreBlock(d.lab.DataPlanes[0])
	if err != nil {
		return err
	}
	c, err := d.pdClient(ctx, operator.Addressing{IPPrefix: prefix}.PD(0))
	if err != nil {
		return err
	}
	defer c.Close()
	readTS, err := c.TS(ctx)
	if err != nil {
		return err
	}
	txns := d.bankLog.Txns()
	n := bank.Count(txns, ts)
	d.report.TxnsBeforeCommitTS, d.report.TxnsAfterCommitTS, d.report.UnknownBeforeCommitTS = n.Before, n.After, n.Unknown
	if err := bank.Check(ctx, c, d.bankCfg, txns, ts, readTS); err != nil {
		d.report.Checker = err.Error()
		return fmt.Errorf("checker: %w", err)
	}
	d.report.Checker = "pass"
	d.Say("checker: the restored cluster holds exactly the %d transfers committed at or before %d (%d later ones absent, %d of unknown outcome either way)",
		n.Before, ts, n.After, n.Unknown)
	return nil
}

// CheckLifted verifies the source cluster holds no GC safepoint, paused scheduler or zeroed
// limit once the backup is complete. The limits in force are the PD double's ground truth
// (tidb.ReadHeld): real PD's API shows no TTL'd value.
func (d *Harness) CheckLifted(ctx context.Context) error {
	addr := d.lab.DataPlanes[0].PDAddress()
	h, err := d.tls.ReadHeld(ctx, d.PDURL(addr))
	if err != nil {
		return err
	}
	d.report.HeldAfterBackup = h
	if h.Any() {
		return fmt.Errorf("after the backup the source cluster still holds %+v", h)
	}
	d.Say("source cluster: GC safepoint, schedulers and schedule limits all lifted")
	return nil
}

// ErrFailed marks a backup or restore that ended Failed.
var ErrFailed = errors.New("failed")

func ConditionMessage(cs []metav1.Condition, t string) string {
	if c := meta.FindStatusCondition(cs, t); c != nil {
		return c.Reason + ": " + c.Message
	}
	return ""
}

// StartSuite starts what a suite of points or scenarios shares: the controllers, the source
// cluster and its bank workload (stopped by d.stop), the bucket, and the record of the volumes
// that exist now (the nodes' root volumes, the source cluster's), which are not the suite's to
// account for.
func (d *Harness) StartSuite(ctx context.Context) error {
	if err := ensureDir(logDir(d.lab)); err != nil {
		return err
	}
	if err := d.startControllers(ctx); err != nil {
		return err
	}
	if err := d.sourceCluster(ctx); err != nil {
		return err
	}
	if err := d.startBank(ctx); err != nil {
		return err
	}
	if err := d.waitTransfers(ctx, 0); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(d.lab.AWS.Dir, "s3", Bucket), 0o755); err != nil {
		return err
	}
	vols, err := d.aws.ListVolumes(ctx, nil)
	if err != nil {
		return err
	}
	d.crashBefore = map[string]bool{}
	for _, v := range vols {
		d.crashBefore[v.ID] = true
	}
	return nil
}
