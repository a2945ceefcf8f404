// Package env is the whole lab as one thing: it brings up the Kubernetes control planes
// (package controlplane), one AWS double shared by all clusters, lab nodes (each an EC2
// instance of the double in its cluster's zone) and a stand-in tidb-operator in every
// data-plane cluster, installs fedbr's CRDs and the lab StorageClass everywhere, and takes it
// all down again. It is what `fedbr-lab lab up|down|status|logs` run, and what e2e tests and demos
// call without the CLI.
//
// The node, operator and AWS processes are the fedbr-lab binary given in Options (tests build it;
// the CLI passes itself), started detached in their own sessions with logs under the lab
// directory, so the lab outlives the command that started it. DIR/lab.json (see Lab) says
// where everything is; DIR/controlplane.json records the control-plane processes.
package env

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/checkout"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/eksauth"
	"github.com/fedbr/fedbr/internal/lab/kubelet"
	"github.com/fedbr/fedbr/internal/lab/loopfs"
)

// File is the lab description under the lab directory.
const File = "lab.json"

// Component names of the processes env starts (the control-plane ones are controlplane's).
const (
	ComponentAWS      = "aws"
	ComponentNode     = "node"
	ComponentOperator = "operator"
	ComponentEKSAuth  = "eksauth"
)

// EKSAuthUser is the Kubernetes user the EKS authenticator maps the lab's AWS identity
// (awsdouble.LabUserARN) to, as an aws-auth mapUsers entry would; Install binds it to the
// manager's data-plane role (the agent chart's managerAccess.subjects).
const EKSAuthUser = "fedbr-manager"

// nodeShutdownGrace is the longest grace period pods get when a node stops; Down gives nodes
// this long plus its own grace.
const nodeShutdownGrace = 5 * time.Second

// Options configure Up.
type Options struct {
	// Dir holds the lab's state; required.
	Dir string
	// Fedbr is the fedbr-lab binary (cmd/fedbr-lab: fedbr plus `lab`) that runs nodes,
	// operators and the AWS double (and, through the nodes' default image mapping, every pod of
	// image fedbr); required.
	Fedbr string
	// BinDir holds etcd and the Kubernetes binaries; default the `make k8s-bin` cache of the
	// checkout this package was built from (controlplane.DefaultBinDir).
	BinDir string
	// CRDDirs hold the CRD manifests installed in every cluster; default
	// controlplane.DefaultCRDDirs of the checkout this package was built from.
	CRDDirs []string
	// Clusters are the cluster names; default DefaultClusters.
	Clusters []string
	// Control is the control cluster (no nodes, no operator); default the first cluster.
	Control string
	// Nodes is the number of nodes per data-plane cluster; default 3.
	Nodes int
	// Zones overrides the zone of data-plane clusters (cluster → zone).
	Zones map[string]string
	// Region is the AWS double's region; default us-west-2.
	Region string
	// EKSAuth is the data plane whose kube-apiserver authenticates bearer tokens as an EKS
	// cluster does, through the lab's EKS authenticator (package eksauth) and the AWS double's
	// STS; Install gives the manager an "aws eks get-token" user for it. Default the first
	// data plane; NoEKSAuth for none.
	EKSAuth string
	// IPBase places data plane i (from 0) on 127.0.(IPBase+i+1); default 10.
	IPBase int
	// StoreIDStep is the store-id base of data plane i: StoreIDStep*(i+1); default 1000.
	StoreIDStep uint64
	// Images are extra image rules PATTERN=PATH for every node, after fedbr's own.
	Images []string
	// SnapshotTime is the fixed time the AWS double adds to every snapshot's completion (its
	// --snapshot-base-duration); default DefaultSnapshotTime.
	SnapshotTime time.Duration
	// Volumes is how the AWS double keeps EBS volumes (its --volumes): awsdouble.VolumesExt4
	// (default: images the nodes attach as loop devices and mount ext4; needs root) or
	// awsdouble.VolumesDir.
	Volumes string
	// ReadyTimeout bounds each wait; default 2 minutes.
	ReadyTimeout time.Duration
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// Lab describes a running lab; Up writes it to DIR/lab.json and Load reads it.
type Lab struct {
	Dir string `json:"dir"`
	// Kubeconfig has one context per cluster, named after it (the manager's input).
	Kubeconfig string `json:"kubeconfig"`
	// Contexts are the clusters in --clusters order.
	Contexts []string `json:"contexts"`
	// Control is the control cluster.
	Control string `json:"control"`
	// StorageClass is the lab's default StorageClass in every cluster (provisioner
	// ebs.csi.aws.com, WaitForFirstConsumer): the nodes provision its claims in the AWS double.
	StorageClass string `json:"storageClass"`
	// Fedbr is the fedbr-lab binary every lab process runs.
	Fedbr      string      `json:"fedbr"`
	AWS        AWS         `json:"aws"`
	DataPlanes []DataPlane `json:"dataPlanes"`
	// ControlNodes are the control cluster's nodes: none after Up, one once Install ran (it
	// runs the manager's pod; no AWS instance).
	ControlNodes []Node `json:"controlNodes,omitempty"`
	// Banks are the bank workloads `lab tidb --bank` started (TiDB with Bank).
	Banks []Bank `json:"banks,omitempty"`
	// EKSAuth is the EKS authenticator of one data plane (Options.EKSAuth), nil for none.
	EKSAuth *EKSAuth `json:"eksAuth,omitempty"`
}

// EKSAuth is the lab's EKS token authenticator of one data plane: its kube-apiserver's token
// webhook, which replays tokens to the AWS double's STS and maps the lab's identity to User.
type EKSAuth struct {
	Cluster string `json:"cluster"`
	// Endpoint is the authenticator's URL (https://127.0.0.1:PORT).
	Endpoint string `json:"endpoint"`
	// User is the user the lab's AWS identity maps to (EKSAuthUser).
	User    string               `json:"user"`
	Files   eksauth.Files        `json:"files"`
	Process controlplane.Process `json:"process"`
}

// AWS is the lab's AWS double.
type AWS struct {
	// Endpoint is the URL for every AWS service (EC2, EBS, CloudWatch, S3) and the admin API.
	Endpoint string `json:"endpoint"`
	Region   string `json:"region"`
	// Dir holds the double's state: volume directories, snapshots, S3 objects.
	Dir     string               `json:"dir"`
	Process controlplane.Process `json:"process"`
}

// DataPlane is one data-plane cluster.
type DataPlane struct {
	Cluster string `json:"cluster"`
	Zone    string `json:"zone"`
	// IPPrefix (127.0.N) is the operator's address block: PD member i on 127.0.N.(10+i):2379,
	// TiKV i on 127.0.N.(100+i):20160.
	IPPrefix string `json:"ipPrefix"`
	// StoreIDBase: TiKV i of a TidbCluster in this cluster gets store id StoreIDBase+i+1.
	StoreIDBase uint64               `json:"storeIdBase"`
	Nodes       []Node               `json:"nodes"`
	Operator    controlplane.Process `json:"operator"`
}

// Node is one lab node.
type Node struct {
	Name       string `json:"name"`
	InstanceID string `json:"instanceId"`
	// Dir holds the node's pods; container logs are under Dir/logs.
	Dir     string               `json:"dir"`
	Process controlplane.Process `json:"process"`
}

// DNSDir is the lab's cluster DNS table (labdns), which every data plane's operator writes
// and every data plane's node reads.
func (l *Lab) DNSDir() string { return filepath.Join(l.Dir, "dns") }

// PDAddress is the PD client URL of a TidbCluster in this data plane with the operator's
// default addressing (http://127.0.N.10:2379).
func (d DataPlane) PDAddress() string {
	return "http://" + net.JoinHostPort(d.IPPrefix+".10", "2379")
}

// DataPlane returns the data plane of cluster, or false.
func (l *Lab) DataPlane(cluster string) (DataPlane, bool) {
	for _, d := range l.DataPlanes {
		if d.Cluster == cluster {
			return d, true
		}
	}
	return DataPlane{}, false
}

// processes lists every process recorded in l, with the cluster it belongs to ("" for the
// AWS double) and its name.
func (l *Lab) processes() []ProcessStatus {
	var out []ProcessStatus
	if l.AWS.Process.PID != 0 {
		out = append(out, ProcessStatus{Component: ComponentAWS, Name: ComponentAWS, Process: l.AWS.Process})
	}
	if l.EKSAuth != nil && l.EKSAuth.Process.PID != 0 {
		out = append(out, ProcessStatus{Cluster: l.EKSAuth.Cluster, Component: ComponentEKSAuth, Name: ComponentEKSAuth, Process: l.EKSAuth.Process})
	}
	for _, n := range l.ControlNodes {
		if n.Process.PID != 0 {
			out = append(out, ProcessStatus{Cluster: l.Control, Component: ComponentNode, Name: n.Name, Process: n.Process})
		}
	}
	for _, b := range l.Banks {
		if b.Process.PID != 0 {
			out = append(out, ProcessStatus{Component: ComponentBank, Name: ComponentBank + "-" + b.Namespace, Process: b.Process})
		}
	}
	for _, d := range l.DataPlanes {
		if d.Operator.PID != 0 {
			out = append(out, ProcessStatus{Cluster: d.Cluster, Component: ComponentOperator, Name: ComponentOperator, Process: d.Operator})
		}
		for _, n := range d.Nodes {
			if n.Process.PID != 0 {
				out = append(out, ProcessStatus{Cluster: d.Cluster, Component: ComponentNode, Name: n.Name, Process: n.Process})
			}
		}
	}
	return out
}

func (l *Lab) save() error {
	data, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.Dir, File+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(l.Dir, File))
}

// Load reads the lab description in dir.
func Load(dir string) (*Lab, error) {
	data, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		return nil, err
	}
	l := &Lab{}
	if err := json.Unmarshal(data, l); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, File), err)
	}
	return l, nil
}

// RepoRoot is the fedbr checkout (checkout.Root): the defaults of BinDir, CRDDirs, the charts
// and the status guard live there.
func RepoRoot() string { return checkout.Root() }

// validate checks what NewPlan does not: the paths.
func (o Options) validate() error {
	switch {
	case o.Dir == "":
		return errors.New("--dir is required")
	case o.Fedbr == "":
		return errors.New("the fedbr-lab binary to run is required")
	case len(o.CRDDirs) == 0:
		return errors.New("the CRD directories are required")
	case o.BinDir == "":
		return errors.New("the Kubernetes binaries' directory is required")
	}
	if st, err := os.Stat(o.Fedbr); err != nil || st.IsDir() {
		return fmt.Errorf("fedbr-lab binary %s: not a file", o.Fedbr)
	}
	if err := awsdouble.ValidVolumes(o.Volumes); err != nil {
		return fmt.Errorf("--%w", err)
	}
	if o.Volumes == awsdouble.VolumesExt4 {
		if err := loopfs.Available(); err != nil {
			return err
		}
	}
	for _, dir := range o.CRDDirs {
		crds, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(crds) == 0 {
			return fmt.Errorf("no CRD manifests (*.yaml) in %s: pass the checkout's config/crd/bases and test/fixtures/crd", dir)
		}
	}
	for _, r := range o.Images {
		if _, err := kubelet.ParseImageRule(r); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks the options before anything starts.
func (o Options) Validate() error {
	o, err := o.withPaths()
	if err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	if _, err := NewPlan(o.withDefaults()); err != nil {
		return err
	}
	return controlplane.Options{Dir: o.Dir, BinDir: o.BinDir, Clusters: o.withDefaults().Clusters}.Validate()
}

// withPaths fills in BinDir and CRDDirs from the checkout when they are not given.
func (o Options) withPaths() (Options, error) {
	if o.BinDir == "" {
		dir, err := controlplane.DefaultBinDir(RepoRoot())
		if err != nil {
			return o, err
		}
		o.BinDir = dir
	}
	if len(o.CRDDirs) == 0 {
		o.CRDDirs = controlplane.DefaultCRDDirs(RepoRoot())
	}
	return o, nil
}

func (o Options) withDefaults() Options {
	if len(o.Clusters) == 0 {
		o.Clusters = slices.Clone(DefaultClusters)
	}
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.SnapshotTime <= 0 {
		o.SnapshotTime = DefaultSnapshotTime
	}
	if o.Volumes == "" {
		o.Volumes = awsdouble.VolumesExt4
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return o
}

// running lists the pids of the lab in dir that still run, control planes included.
func running(dir string) []int {
	var pids []int
	if l, err := Load(dir); err == nil {
		for _, p := range l.processes() {
			if p.Process.Running() {
				pids = append(pids, p.Process.PID)
			}
		}
	}
	if sts, err := controlplane.Status(dir); err == nil {
		for _, s := range sts {
			if s.Running {
				pids = append(pids, s.PID)
			}
		}
	}
	slices.Sort(pids)
	return pids
}

// checkAddresses fails when a data plane's PD address cannot be bound: another lab (or
// anything else) holds the block, and the TidbClusters would fail much later, obscurely.
func checkAddresses(p Plan) error {
	for _, d := range p.DataPlanes {
		addr := net.JoinHostPort(d.IPPrefix+".10", "2379")
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("data plane %s: cannot bind its PD address %s (%w): another lab runs there? pass another --ip-base", d.Cluster, addr, err)
		}
		_ = ln.Close()
	}
	return nil
}

// parallel runs fns concurrently and joins their errors.
func parallel(fns ...func() error) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, f := range fns {
		wg.Go(func() {
			if err := f(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ProcessStatus is one lab process for `fedbr-lab lab status`.
type ProcessStatus struct {
	// Cluster is empty for the AWS double.
	Cluster   string `json:"cluster,omitempty"`
	Component string `json:"component"`
	// Name is the node name for nodes, else the component.
	Name    string               `json:"name"`
	Process controlplane.Process `json:"process"`
	Running bool                 `json:"running"`
}

// Status lists every process of the lab in dir: control planes, then the AWS double, operators
// and nodes.
func Status(dir string) ([]ProcessStatus, error) {
	cps, cpErr := controlplane.Status(dir)
	l, labErr := Load(dir)
	if cpErr != nil && labErr != nil {
		return nil, fmt.Errorf("no lab in %s: %w", dir, cpErr)
	}
	var out []ProcessStatus
	for _, s := range cps {
		out = append(out, ProcessStatus{Cluster: s.Cluster, Component: s.Component, Name: s.Component, Running: s.Running,
			Process: controlplane.Process{Component: s.Component, PID: s.PID, Port: s.Port, Log: s.Log}})
	}
	if labErr == nil {
		for _, p := range l.processes() {
			p.Running = p.Process.Running()
			out = append(out, p)
		}
	}
	return out, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
