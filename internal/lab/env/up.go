package env

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/eksauth"
	"github.com/fedbr/fedbr/internal/lab/kubelet"
	"github.com/fedbr/fedbr/internal/lab/labdns"
	"github.com/fedbr/fedbr/internal/lab/port"
)

// Up brings up the whole lab in o.Dir and returns its description, also written to
// DIR/lab.json. Independent steps run in parallel: the control planes and the AWS double
// start together; then, per cluster, CRDs and the StorageClass are installed while the nodes
// start; operators start once their cluster has the CRDs. If anything fails, everything
// started is stopped and the error names the step and the end of the failing process's log.
func Up(ctx context.Context, o Options) (*Lab, error) {
	o, err := o.withDefaults().withPaths()
	if err != nil {
		return nil, err
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	plan, err := NewPlan(o)
	if err != nil {
		return nil, err
	}
	if err := (controlplane.Options{Dir: o.Dir, BinDir: o.BinDir, Clusters: o.Clusters}).Validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if pids := running(dir); len(pids) > 0 {
		return nil, fmt.Errorf("a lab is already running in %s (pids %v): run `fedbr-lab lab down --dir %s` first", dir, pids, dir)
	}
	if err := checkAddresses(plan); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	fedbr, err := filepath.Abs(o.Fedbr)
	if err != nil {
		return nil, err
	}
	old, _ := Load(dir)
	u := &upper{start: time.Now(), o: o, plan: plan, lab: newLab(dir, fedbr, o, plan, old)}
	if err := u.run(ctx); err != nil {
		// Record what runs, so Down finds it, then stop it all.
		_ = u.save()
		if derr := Down(context.WithoutCancel(ctx), dir, 5*time.Second); derr != nil {
			err = errors.Join(err, fmt.Errorf("cleaning up: %w", derr))
		}
		return nil, err
	}
	return u.lab, nil
}

// newLab lays out the lab's description from the plan; processes are filled in as they
// start. Instances recorded by an earlier run in dir are reused, so a lab brought down and
// up again keeps its nodes' instances and their attached volumes.
func newLab(dir, fedbr string, o Options, plan Plan, old *Lab) *Lab {
	l := &Lab{
		Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), Contexts: slices.Clone(o.Clusters),
		Control: plan.Control, StorageClass: DefaultStorageClass, Fedbr: fedbr,
		AWS: AWS{Region: plan.Region, Dir: filepath.Join(dir, "aws")},
	}
	instances := map[string]string{}
	if old != nil {
		for _, d := range old.DataPlanes {
			for _, n := range d.Nodes {
				instances[n.Name] = n.InstanceID
			}
		}
	}
	for _, p := range plan.DataPlanes {
		d := DataPlane{Cluster: p.Cluster, Zone: p.Zone, IPPrefix: p.IPPrefix, StoreIDBase: p.StoreIDBase}
		for _, name := range p.Nodes {
			d.Nodes = append(d.Nodes, Node{Name: name, InstanceID: instances[name], Dir: filepath.Join(dir, p.Cluster, "nodes", name)})
		}
		l.DataPlanes = append(l.DataPlanes, d)
	}
	return l
}

// upper runs one Up.
type upper struct {
	start time.Time
	o     Options
	plan  Plan
	mu    sync.Mutex // guards lab's processes
	lab   *Lab
}

func (u *upper) save() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.lab.save()
}

// log prefixes progress with the time since Up started, so slow steps show.
func (u *upper) log(format string, args ...any) {
	u.o.Log("[%5.1fs] "+format, append([]any{time.Since(u.start).Seconds()}, args...)...)
}

func (u *upper) run(ctx context.Context) error {
	// The AWS double starts with the control planes; each cluster is set up as soon as its own
	// control plane is ready, while the others still start.
	ports, err := port.Free(1)
	if err != nil {
		return err
	}
	awsPort := ports[0]
	// The EKS authenticator starts first: its plane's kube-apiserver is started with its
	// webhook configuration. It needs only the AWS double's address, not the double.
	apiServerArgs, err := u.startEKSAuth(awsPort)
	if err != nil {
		return err
	}
	awsReady := make(chan struct{})
	var awsErr error
	go func() {
		defer close(awsReady)
		awsErr = u.startAWS(ctx, awsPort)
	}()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	_, cpErr := controlplane.Up(ctx, controlplane.Options{Dir: u.lab.Dir, BinDir: u.o.BinDir, Clusters: u.o.Clusters,
		ReadyTimeout: u.o.ReadyTimeout, Log: u.log, APIServerArgs: apiServerArgs,
		Ready: func(c controlplane.Cluster) {
			wg.Go(func() {
				if err := u.setUpCluster(ctx, c, awsReady, &awsErr); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("cluster %s: %w", c.Name, err))
					mu.Unlock()
				}
			})
		},
	})
	wg.Wait()
	<-awsReady
	err = errors.Join(cpErr, awsErr, errors.Join(errs...))
	if serr := u.save(); serr != nil {
		err = errors.Join(err, serr)
	}
	if err != nil {
		return err
	}
	// An operator or authenticator that died at start (say, a bad flag) would otherwise show
	// only much later.
	if a := u.lab.EKSAuth; a != nil && !a.Process.Running() {
		return fmt.Errorf("cluster %s: the EKS authenticator exited: %s", a.Cluster, a.Process.LogTail(5))
	}
	for _, d := range u.lab.DataPlanes {
		if !d.Operator.Running() {
			return fmt.Errorf("cluster %s: the operator exited: %s", d.Cluster, d.Operator.LogTail(5))
		}
	}
	u.log("lab up")
	return nil
}

// setUpCluster installs the CRDs and the StorageClass in a cluster whose control plane is
// ready and, in a data plane, starts the nodes (once the AWS double is up) and the operator
// (once the CRDs are). Nodes and operators use the cluster's own kubeconfig: the lab's, with
// every context, is written only once all control planes are up.
func (u *upper) setUpCluster(ctx context.Context, c controlplane.Cluster, awsReady <-chan struct{}, awsErr *error) error {
	cfg, err := clusterConfig(c.Kubeconfig, c.Name)
	if err != nil {
		return err
	}
	d, isDataPlane := u.lab.DataPlane(c.Name)
	steps := []func() error{func() error {
		if err := install(ctx, cfg, u.o.CRDDirs, u.lab.StorageClass); err != nil {
			return err
		}
		u.log("%s: CRDs and StorageClass %s installed", c.Name, u.lab.StorageClass)
		if !isDataPlane {
			return nil
		}
		return u.startOperator(c, d)
	}}
	if isDataPlane {
		steps = append(steps, func() error {
			<-awsReady
			if *awsErr != nil {
				return errors.New("no nodes without the AWS double")
			}
			return u.startNodes(ctx, cfg, c)
		})
	}
	return parallel(steps...)
}

// startEKSAuth starts the EKS authenticator of the plan's EKSAuth plane (if any) on a free
// port, with its certificate and the webhook configuration under DIR/eksauth, replaying
// tokens to the AWS double on awsPort and mapping the lab's identity to EKSAuthUser. It
// returns the kube-apiserver flags of that plane.
func (u *upper) startEKSAuth(awsPort int) (map[string][]string, error) {
	cluster := u.plan.EKSAuth
	if cluster == "" {
		return nil, nil
	}
	ports, err := port.Free(1)
	if err != nil {
		return nil, err
	}
	endpoint := "https://127.0.0.1:" + itoa(ports[0])
	files, err := eksauth.WriteFiles(filepath.Join(u.lab.Dir, "eksauth"), endpoint)
	if err != nil {
		return nil, fmt.Errorf("EKS authenticator of %s: %w", cluster, err)
	}
	p, err := controlplane.Spawn(controlplane.Command{
		Binary: u.lab.Fedbr, Dir: u.lab.Dir, Log: filepath.Join(u.lab.Dir, cluster, "logs", "eksauth.log"), Component: ComponentEKSAuth, Port: ports[0],
		Args: []string{"lab", "eksauth", "--cluster", cluster, "--listen", "127.0.0.1:" + itoa(ports[0]),
			"--cert", files.Cert, "--key", files.Key, "--sts-endpoint", "http://127.0.0.1:" + itoa(awsPort),
			"--map", awsdouble.LabUserARN(awsdouble.DefaultAccountID) + "=" + EKSAuthUser},
	})
	u.mu.Lock()
	u.lab.EKSAuth = &EKSAuth{Cluster: cluster, Endpoint: endpoint, User: EKSAuthUser, Files: files, Process: p}
	u.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("EKS authenticator of %s: %w", cluster, err)
	}
	u.log("%s: EKS authenticator on %s (STS: the AWS double; %s is %s)", cluster, endpoint, awsdouble.LabUserARN(awsdouble.DefaultAccountID), EKSAuthUser)
	return map[string][]string{cluster: files.APIServerArgs()}, nil
}

// StepRoleName is the IAM role of the steps in the lab's AWS double (IRSA): the fedbr-br service
// account of any namespace may assume it, as docs/iam's account-wide trust allows.
const StepRoleName = "fedbr-br"

// stepRoleSubjects are the token subjects StepRoleName's trust allows.
const stepRoleSubjects = "system:serviceaccount:*:fedbr-br"

// StepRoleARN is StepRoleName's ARN in the lab's account.
func StepRoleARN() string {
	return "arn:aws:iam::" + awsdouble.DefaultAccountID + ":role/" + StepRoleName
}

// startAWS starts the AWS double on awsPort, waits for it, and creates the instance of every
// node that has none yet.
func (u *upper) startAWS(ctx context.Context, awsPort int) error {
	listen := "127.0.0.1:" + itoa(awsPort)
	p, err := controlplane.Spawn(controlplane.Command{
		Binary: u.lab.Fedbr, Dir: u.lab.Dir, Log: filepath.Join(u.lab.Dir, "logs", "aws.log"), Component: ComponentAWS, Port: awsPort,
		Args: []string{"lab", "aws", "--dir", u.lab.AWS.Dir, "--listen", listen, "--region", u.plan.Region,
			"--snapshot-base-duration", u.o.SnapshotTime.String(), "--volumes", u.o.Volumes, "--web-identity-role", StepRoleName + "=" + stepRoleSubjects},
	})
	u.mu.Lock()
	u.lab.AWS.Process = p
	u.lab.AWS.Endpoint = "http://" + listen
	u.mu.Unlock()
	if err != nil {
		return fmt.Errorf("AWS double: %w", err)
	}
	if err := waitHealthy(ctx, u.lab.AWS.Endpoint+"/_lab/healthz", u.o.ReadyTimeout, p); err != nil {
		return fmt.Errorf("AWS double: %w (log %s)", err, p.Log)
	}
	admin := kubelet.AWSAdmin{Endpoint: u.lab.AWS.Endpoint}
	for i := range u.lab.DataPlanes {
		d := &u.lab.DataPlanes[i]
		for j := range d.Nodes {
			n := &d.Nodes[j]
			if n.InstanceID != "" {
				continue
			}
			id, err := admin.CreateInstance(ctx, d.Zone, map[string]string{"Name": n.Name, "fedbr.io/lab-node": n.Name, "fedbr.io/lab-cluster": d.Cluster})
			if err != nil {
				return fmt.Errorf("instance of node %s: %w", n.Name, err)
			}
			u.mu.Lock()
			n.InstanceID = id
			u.mu.Unlock()
		}
	}
	u.log("AWS double ready on %s (region %s), node instances created", u.lab.AWS.Endpoint, u.plan.Region)
	return nil
}

// startNodes starts the cluster's nodes and waits until each is Ready and schedulable.
func (u *upper) startNodes(ctx context.Context, cfg *rest.Config, c controlplane.Cluster) error {
	cluster := c.Name
	d := u.dataPlane(cluster)
	images := []string{"fedbr=" + u.lab.Fedbr, "*/fedbr=" + u.lab.Fedbr}
	images = append(images, u.o.Images...)
	for j, n := range d.Nodes {
		args := []string{"lab", "node", "--kubeconfig", c.Kubeconfig, "--context", cluster, "--name", n.Name,
			"--zone", d.Zone, "--aws-endpoint", u.lab.AWS.Endpoint, "--aws-egress-ca", awsdouble.EgressCAFile(u.lab.AWS.Dir),
			"--instance-id", n.InstanceID, "--dir", n.Dir,
			"--dns-dir", u.lab.DNSDir(), "--cluster-domain", labdns.Domain(cluster),
			"--shutdown-grace", nodeShutdownGrace.String()}
		for _, im := range images {
			args = append(args, "--image", im)
		}
		p, err := controlplane.Spawn(controlplane.Command{
			Binary: u.lab.Fedbr, Dir: u.lab.Dir, Log: filepath.Join(u.lab.Dir, cluster, "logs", "node-"+n.Name+".log"),
			Component: ComponentNode, Args: args,
		})
		u.setNodeProcess(cluster, j, p)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	d = u.dataPlane(cluster)
	if err := waitNodes(ctx, cfg, d.Nodes, u.o.ReadyTimeout); err != nil {
		return err
	}
	u.log("%s: %d nodes ready in %s", cluster, len(d.Nodes), d.Zone)
	return nil
}

// dataPlane is a copy of the cluster's data plane, taken while no process is being recorded.
func (u *upper) dataPlane(cluster string) DataPlane {
	u.mu.Lock()
	defer u.mu.Unlock()
	d, _ := u.lab.DataPlane(cluster)
	d.Nodes = slices.Clone(d.Nodes)
	return d
}

func (u *upper) setNodeProcess(cluster string, j int, p controlplane.Process) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for i := range u.lab.DataPlanes {
		if u.lab.DataPlanes[i].Cluster == cluster {
			u.lab.DataPlanes[i].Nodes[j].Process = p
		}
	}
}

// startOperator starts the cluster's stand-in tidb-operator with its address block.
func (u *upper) startOperator(c controlplane.Cluster, d DataPlane) error {
	cluster := c.Name
	p, err := controlplane.Spawn(controlplane.Command{
		Binary: u.lab.Fedbr, Dir: u.lab.Dir, Log: filepath.Join(u.lab.Dir, cluster, "logs", "operator.log"), Component: ComponentOperator,
		Args: []string{"lab", "operator", "--kubeconfig", c.Kubeconfig, "--context", cluster,
			"--ip-prefix", d.IPPrefix, "--store-id-base", fmt.Sprint(d.StoreIDBase),
			"--dns-dir", u.lab.DNSDir(), "--cluster-domain", labdns.Domain(cluster)},
	})
	u.mu.Lock()
	for i := range u.lab.DataPlanes {
		if u.lab.DataPlanes[i].Cluster == cluster {
			u.lab.DataPlanes[i].Operator = p
		}
	}
	u.mu.Unlock()
	if err != nil {
		return fmt.Errorf("operator of %s: %w", cluster, err)
	}
	u.log("%s: operator started (PD at %s, store ids from %d)", cluster, d.PDAddress(), d.StoreIDBase+1)
	return nil
}

// waitHealthy polls url until it answers 200, the process exits, or the timeout passes.
func waitHealthy(ctx context.Context, url string, timeout time.Duration, p controlplane.Process) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Errorf("%s answered %s", url, resp.Status)
		} else {
			last = err
		}
		if !p.Running() {
			return fmt.Errorf("exited: %s", p.LogTail(5))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not healthy after %s: %w", timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
