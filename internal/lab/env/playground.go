package env

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/operator"
)

// ComponentBank is the component name of a playground's bank workload (TiDB with Bank).
const ComponentBank = "bank"

// Bank is a bank workload TiDB started: a `fedbr-lab lab bank run` process writing to the
// TiDB cluster of Namespace until `lab down`, its committed transactions in Log.
type Bank struct {
	Namespace string `json:"namespace"`
	// PD is the address (host:port) the workload writes through.
	PD string `json:"pd"`
	// Log is the file of committed transactions (JSON lines, appended every second).
	Log      string               `json:"log"`
	Accounts int                  `json:"accounts"`
	Process  controlplane.Process `json:"process"`
}

// TiDBOptions configure TiDB.
type TiDBOptions struct {
	// Namespace holds the TidbClusters in every data plane; it is created in every cluster of
	// the lab (the control cluster's holds the VolumeBackups and VolumeRestores of a playground).
	Namespace string
	// Name of the TidbClusters; default "basic".
	Name string
	// TiKVPerPlane is the number of TiKV per data plane; default 1.
	TiKVPerPlane int
	// RaftVolume gives each TiKV a second volume for its raft log (storageVolumes "raft").
	RaftVolume bool
	// Recovery creates the TidbClusters in recovery mode, on each data plane's restore address
	// block (RestoreBlock), for a VolumeRestore to fill; no store starts until it does.
	Recovery bool
	// PodSecurity is the namespace's pod-security.kubernetes.io/enforce level; default
	// "restricted" ("privileged" for a restore whose warm-up reads block devices).
	PodSecurity string
	// Bucket is created in the AWS double's S3 unless empty.
	Bucket string
	// Bank loads Accounts accounts and starts a bank workload (Workers at Rate transfers per
	// second) that runs until `lab down`; TiDB returns once it committed bank.MinTransfers
	// transfers. Not with Recovery.
	Bank     bool
	Accounts int
	Workers  int
	Rate     float64
	// Timeout bounds each wait; default 3 minutes.
	Timeout time.Duration
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

func (o TiDBOptions) withDefaults() TiDBOptions {
	if o.Name == "" {
		o.Name = "basic"
	}
	if o.TiKVPerPlane == 0 {
		o.TiKVPerPlane = 1
	}
	if o.PodSecurity == "" {
		o.PodSecurity = "restricted"
	}
	if o.Accounts == 0 {
		o.Accounts = 200
	}
	if o.Workers == 0 {
		o.Workers = 2
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return o
}

// Validate says what is wrong with o, before anything is created.
func (o TiDBOptions) Validate() error {
	o = o.withDefaults()
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("a namespace is required"))
	}
	if o.TiKVPerPlane < 1 || o.TiKVPerPlane > 10 {
		errs = append(errs, fmt.Errorf("TiKV per data plane %d: want 1 to 10", o.TiKVPerPlane))
	}
	switch o.PodSecurity {
	case "restricted", "baseline", "privileged":
	default:
		errs = append(errs, fmt.Errorf("pod security %q: want restricted, baseline or privileged", o.PodSecurity))
	}
	if o.Bank && o.Recovery {
		errs = append(errs, errors.New("a bank workload writes to a live cluster, not to one in recovery mode"))
	}
	if o.Accounts < 2 || o.Workers < 1 || o.Rate < 0 || o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("bank: accounts %d (at least 2), workers %d (at least 1), rate %v and timeout %s (not negative)",
			o.Accounts, o.Workers, o.Rate, o.Timeout))
	}
	return errors.Join(errs...)
}

// TiDB creates a TiDB cluster over every data plane of the lab l, as a user of the playground
// needs one: namespaces, the bucket, the TidbClusters (FederatedTidbClusters, or
// RecoveryTidbClusters with Recovery), and, with Bank, a bank workload left running. It
// returns once every store is Up (not with Recovery) and the workload committed
// bank.MinTransfers transfers. Running it again leaves what exists as it is.
func TiDB(ctx context.Context, l *Lab, o TiDBOptions) error {
	if err := o.Validate(); err != nil {
		return err
	}
	o = o.withDefaults()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, pcv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			return err
		}
	}
	kube := map[string]client.Client{}
	for _, c := range l.Contexts {
		cfg, err := l.Config(c)
		if err != nil {
			return err
		}
		if kube[c], err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			return err
		}
		if err := EnsureNamespace(ctx, kube[c], o.Namespace, o.PodSecurity); err != nil {
			return fmt.Errorf("%s: %w", c, err)
		}
		if o.PodSecurity == "restricted" {
			if err := CheckEnforced(ctx, kube[c], o.Namespace, o.Timeout); err != nil {
				return fmt.Errorf("%s: %w", c, err)
			}
		}
	}
	o.Log("namespace %s (%s=%s) in %v", o.Namespace, PodSecurityEnforce, o.PodSecurity, l.Contexts)
	if o.Bucket != "" {
		if err := awsdouble.CreateBucket(ctx, l.AWS.Endpoint, o.Bucket); err != nil {
			return err
		}
		o.Log("bucket %s in the AWS double's S3 (%s)", o.Bucket, l.AWS.Endpoint)
	}
	var tcs map[string]*pcv1alpha1.TidbCluster
	if o.Recovery {
		var err error
		if tcs, err = RecoveryTidbClusters(l, o.Name, o.Namespace, o.TiKVPerPlane, o.RaftVolume); err != nil {
			return err
		}
	} else {
		var split []string
		for _, k := range bank.SplitKeys(o.Accounts, 2*o.TiKVPerPlane*len(l.DataPlanes)) {
			split = append(split, string(k))
		}
		tcs = FederatedTidbClusters(l, o.Name, o.Namespace, o.TiKVPerPlane, o.RaftVolume, split)
	}
	for _, c := range sortedKeys(tcs) {
		if err := client.IgnoreAlreadyExists(kube[c].Create(ctx, tcs[c])); err != nil {
			return fmt.Errorf("%s: TidbCluster %s/%s: %w", c, o.Namespace, o.Name, err)
		}
	}
	if o.Recovery {
		first, _ := RestoreBlock(l.DataPlanes[0])
		o.Log("TidbClusters %s/%s in recovery mode in %v: their stores start once a VolumeRestore restores their volumes (PD %s.10:2379)",
			o.Namespace, o.Name, sortedKeys(tcs), first)
		return nil
	}
	o.Log("TidbClusters %s/%s: %d TiKV over %d data planes, PD %s; waiting for every store", o.Namespace, o.Name,
		o.TiKVPerPlane*len(l.DataPlanes), len(l.DataPlanes), l.DataPlanes[0].PDAddress())
	if err := poll(ctx, o.Timeout, func() (bool, string, error) {
		waiting, err := StoresWaiting(ctx, kube, tcs)
		return waiting == "", waiting, err
	}); err != nil {
		return fmt.Errorf("TiKV stores of %s/%s: %w", o.Namespace, o.Name, err)
	}
	if !o.Bank {
		return nil
	}
	return startBank(ctx, l, o)
}

// startBank starts the bank workload of o.Namespace, unless it runs already, and waits until
// its log holds bank.MinTransfers transfers.
func startBank(ctx context.Context, l *Lab, o TiDBOptions) error {
	var b *Bank
	for i := range l.Banks {
		if l.Banks[i].Namespace == o.Namespace && l.Banks[i].Process.Running() {
			b = &l.Banks[i]
		}
	}
	if b == nil {
		dir := filepath.Join(l.Dir, "tidb", o.Namespace)
		nb := Bank{Namespace: o.Namespace, PD: strings.TrimPrefix(l.DataPlanes[0].PDAddress(), "http://"),
			Log: filepath.Join(dir, "bank-log.jsonl"), Accounts: o.Accounts}
		args := []string{"lab", "bank", "run", "--load", "--pd", nb.PD, "--log", nb.Log, "--accounts", strconv.Itoa(o.Accounts),
			"--workers", strconv.Itoa(o.Workers), "--rate", strconv.FormatFloat(o.Rate, 'f', -1, 64), "--seed", strconv.FormatInt(time.Now().UnixNano(), 10)}
		p, err := controlplane.Spawn(controlplane.Command{Binary: l.Fedbr, Args: args, Dir: l.Dir,
			Log: filepath.Join(dir, "bank.log"), Component: ComponentBank})
		if err != nil {
			return err
		}
		nb.Process = p
		l.Banks = append(l.Banks, nb)
		if err := l.save(); err != nil {
			return err
		}
		b = &l.Banks[len(l.Banks)-1]
		o.Log("bank workload started (pid %d): %d accounts, %d workers, rate %v/s (0: as fast as it goes); log %s", p.PID, o.Accounts, o.Workers, o.Rate, b.Log)
	}
	return poll(ctx, o.Timeout, func() (bool, string, error) {
		if !b.Process.Running() {
			return false, "", fmt.Errorf("the bank workload exited: %s", b.Process.LogTail(5))
		}
		txns, err := bank.ReadLog(b.Log)
		if err != nil {
			return false, err.Error(), nil // not written yet
		}
		n := bank.Count(txns, 0).After
		return n >= bank.MinTransfers, fmt.Sprintf("%d of %d transfers committed", n, bank.MinTransfers), nil
	})
}

// StoresWaiting reads every TidbCluster of tcs (by context; kube has a client for each) and
// names those with fewer TiKV stores Up than their spec.tikv.replicas ("dp1: 1/3 stores Up",
// sorted); empty when every store is Up.
func StoresWaiting(ctx context.Context, kube map[string]client.Client, tcs map[string]*pcv1alpha1.TidbCluster) (string, error) {
	var waiting []string
	for _, c := range sortedKeys(tcs) {
		var tc pcv1alpha1.TidbCluster
		if err := kube[c].Get(ctx, client.ObjectKeyFromObject(tcs[c]), &tc); err != nil {
			return "", fmt.Errorf("%s: TidbCluster %s/%s: %w", c, tcs[c].Namespace, tcs[c].Name, err)
		}
		up := 0
		for _, s := range tc.Status.TiKV.Stores {
			if s.State == "Up" {
				up++
			}
		}
		if want := tcs[c].Spec.TiKV.Replicas; up < int(want) {
			waiting = append(waiting, fmt.Sprintf("%s: %d/%d stores Up", c, up, want))
		}
	}
	return strings.Join(waiting, ", "), nil
}

// EnsureNamespace creates namespace name with pod-security.kubernetes.io/enforce: level, or
// sets the label on the namespace that exists.
func EnsureNamespace(ctx context.Context, c client.Client, name, level string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{PodSecurityEnforce: level}}}
	err := c.Create(ctx, ns)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("namespace %s: %w", name, err)
		}
		return nil
	}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	if ns.Labels[PodSecurityEnforce] == level {
		return nil
	}
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels[PodSecurityEnforce] = level
	if err := c.Update(ctx, ns); err != nil {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}

// CheckEnforced shows that the API server enforces the restricted Pod Security Standard in
// namespace ns: a pod with no security context (root allowed, privilege escalation, no seccomp
// profile), created as a server-side dry run, must be refused by Pod Security Admission. It
// retries while the namespace's default ServiceAccount, which admission looks up first, does
// not exist yet.
func CheckEnforced(ctx context.Context, c client.Client, ns string, timeout time.Duration) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fedbr-pod-security-probe", Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "ghcr.io/fedbr/fedbr:v0.1.0"}}}}
	return poll(ctx, timeout, func() (bool, string, error) {
		last := c.Create(ctx, pod.DeepCopy(), client.DryRunAll)
		switch {
		case last == nil:
			return false, "", fmt.Errorf("namespace %s admitted a pod that violates the restricted Pod Security Standard (server-side dry run): %s=restricted is not enforced there",
				ns, PodSecurityEnforce)
		case strings.Contains(last.Error(), `violates PodSecurity "restricted`):
			return true, "", nil
		case strings.Contains(last.Error(), "serviceaccount"):
			return false, last.Error(), nil
		}
		return false, "", fmt.Errorf("namespace %s: a pod that violates the restricted Pod Security Standard was refused, but not by Pod Security Admission: %w", ns, last)
	})
}

// RestoreBlock is the loopback address block (127.0.N+100) of a TiDB cluster restored into data
// plane d, beside the source's block (127.0.N), so both can run at once.
func RestoreBlock(d DataPlane) (string, error) {
	parts := strings.Split(d.IPPrefix, ".")
	if len(parts) != 3 {
		return "", fmt.Errorf("data plane %s: ip prefix %q", d.Cluster, d.IPPrefix)
	}
	n, err := strconv.Atoi(parts[2])
	if err != nil || n+100 > 254 {
		return "", fmt.Errorf("data plane %s: ip prefix %q has no room for a restore block", d.Cluster, d.IPPrefix)
	}
	return parts[0] + "." + parts[1] + "." + strconv.Itoa(n+100), nil
}

// RecoveryTidbClusters lays out, as FederatedTidbClusters does, fresh TidbClusters in
// recovery mode for a VolumeRestore: each on its data plane's restore block (RestoreBlock),
// the others joining the first's PD there through spec.cluster (its PD Service's name, which the
// lab's cluster DNS resolves to the restore block).
func RecoveryTidbClusters(l *Lab, name, namespace string, tikvPerPlane int, raftVolume bool) (map[string]*pcv1alpha1.TidbCluster, error) {
	tcs := FederatedTidbClusters(l, name, namespace, tikvPerPlane, raftVolume, nil)
	for cluster, tc := range tcs {
		dp, _ := l.DataPlane(cluster)
		block, err := RestoreBlock(dp)
		if err != nil {
			return nil, err
		}
		tc.Spec.RecoveryMode = true
		tc.Annotations = map[string]string{operator.AnnotationIPPrefix: block}
	}
	return tcs, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
