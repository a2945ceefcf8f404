// Package controlplane runs real Kubernetes control planes — etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler from the cached binaries — as local processes, one
// set per lab cluster, on free loopback ports. It is what `fedbr-lab lab up|down|status` drive.
//
// Processes run in their own session, so they outlive the command that started them; the state
// file records every pid with its binary, and Down stops exactly those processes (it checks
// each pid still runs the recorded binary before signalling it).
package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/fedbr/fedbr/internal/lab/port"
)

// Components in start order; Down stops them in reverse.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
)

var components = []string{Etcd, APIServer, ControllerManager, Scheduler}

// StateFile is the lab state, under the lab directory.
const StateFile = "controlplane.json"

// clusterNameRE keeps cluster names usable as kubeconfig contexts and directory names.
var clusterNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// Options configure Up.
type Options struct {
	// Dir holds the lab's state: one folder per cluster, the kubeconfig and the state file.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
	BinDir string
	// Clusters are the cluster names; each becomes a kubeconfig context.
	Clusters []string
	// ReadyTimeout bounds the wait for every API server to be ready.
	ReadyTimeout time.Duration
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
	// APIServerArgs are extra kube-apiserver flags by cluster name, after the lab's (such as a
	// token webhook's, package eksauth).
	APIServerArgs map[string][]string
	// Ready, if set, is called as soon as each cluster is up (from the goroutine that started
	// it, before Up returns), so a caller can start using that cluster — through its own
	// kubeconfig, Cluster.Kubeconfig — while the others still start.
	Ready func(Cluster)
}

// Process is one running component.
type Process struct {
	Component string `json:"component"`
	PID       int    `json:"pid"`
	Binary    string `json:"binary"`
	Port      int    `json:"port"`
	Log       string `json:"log"`
}

// Cluster is one lab cluster.
type Cluster struct {
	Name       string    `json:"name"`
	Dir        string    `json:"dir"`
	Server     string    `json:"server"`
	Kubeconfig string    `json:"kubeconfig"`
	Processes  []Process `json:"processes"`
}

// State is what Up records and Down and Status read.
type State struct {
	Kubeconfig string    `json:"kubeconfig"`
	Clusters   []Cluster `json:"clusters"`
}

// Validate checks options before anything starts.
func (o Options) Validate() error {
	if o.Dir == "" {
		return errors.New("--dir is required")
	}
	if len(o.Clusters) == 0 {
		return errors.New("--clusters must name at least one cluster")
	}
	seen := map[string]bool{}
	for _, c := range o.Clusters {
		if !clusterNameRE.MatchString(c) {
			return fmt.Errorf("cluster name %q must be a DNS label (lowercase letters, digits and '-')", c)
		}
		if seen[c] {
			return fmt.Errorf("cluster name %q appears twice", c)
		}
		seen[c] = true
	}
	for _, b := range components {
		if _, err := os.Stat(filepath.Join(o.BinDir, b)); err != nil {
			return fmt.Errorf("%s not found in %s: run `make k8s-bin` or pass --bin-dir: %w", b, o.BinDir, err)
		}
	}
	return nil
}

// Up starts every cluster's control plane in parallel, waits until every API server is ready,
// and writes the kubeconfig and state. If any cluster fails, everything started is stopped.
func Up(ctx context.Context, o Options) (*State, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	if o.BinDir, err = filepath.Abs(o.BinDir); err != nil {
		return nil, err
	}
	if old, err := Load(dir); err == nil && len(old.running()) > 0 {
		return nil, fmt.Errorf("a lab is already running in %s (pids %v): run `fedbr-lab lab down --dir %s` first", dir, old.running(), dir)
	}

	st := &State{Kubeconfig: filepath.Join(dir, "kubeconfig"), Clusters: make([]Cluster, len(o.Clusters))}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for i, name := range o.Clusters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := startCluster(ctx, o, filepath.Join(dir, name), name)
			mu.Lock()
			st.Clusters[i] = c
			if err != nil {
				errs = append(errs, fmt.Errorf("cluster %s: %w", name, err))
			}
			mu.Unlock()
			if err == nil && o.Ready != nil {
				o.Ready(c)
			}
		}()
	}
	wg.Wait()
	// Record what runs even on failure, so a later Down can clean up after a crash of this one.
	if err := st.save(dir); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		_ = Down(context.WithoutCancel(ctx), dir, 10*time.Second)
		return nil, errors.Join(errs...)
	}
	if err := st.writeKubeconfig(); err != nil {
		return nil, err
	}
	return st, nil
}

// startCluster starts one cluster's components in order. The returned Cluster lists whatever
// was started, also on error.
func startCluster(ctx context.Context, o Options, dir, name string) (Cluster, error) {
	c := Cluster{Name: name, Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	p := pki{dir: filepath.Join(dir, "pki")}
	if err := p.ensure(); err != nil {
		return c, fmt.Errorf("certificates: %w", err)
	}
	ports, err := port.Free(5)
	if err != nil {
		return c, err
	}
	etcdPort, peerPort, apiPort, kcmPort, schedPort := ports[0], ports[1], ports[2], ports[3], ports[4]
	c.Server = "https://127.0.0.1:" + strconv.Itoa(apiPort)
	if err := writeKubeconfig(c.Kubeconfig, []Cluster{c}); err != nil {
		return c, err
	}
	start := func(component string, port int, args ...string) error {
		proc, err := spawn(o.BinDir, dir, component, port, args)
		if proc.PID != 0 {
			c.Processes = append(c.Processes, proc)
		}
		return err
	}

	etcdURL := "http://127.0.0.1:" + strconv.Itoa(etcdPort)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	if err := start(Etcd, etcdPort,
		"--name=lab", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=lab="+peerURL, "--unsafe-no-fsync", "--log-level=warn",
	); err != nil {
		return c, err
	}
	if err := waitHTTP(ctx, nil, etcdURL+"/health", o.ReadyTimeout, c.Processes...); err != nil {
		return c, fmt.Errorf("etcd not healthy: %w (log: %s)", err, filepath.Join(dir, "logs", Etcd+".log"))
	}
	o.Log("%s: etcd ready on %s", name, etcdURL)

	apiArgs := []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
		"--tls-cert-file=" + p.path(servingCert), "--tls-private-key-file=" + p.path(servingKey),
		"--client-ca-file=" + p.path(caCert),
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + p.path(saPub), "--service-account-signing-key-file=" + p.path(saKey),
		"--service-cluster-ip-range=10.96.0.0/16", "--authorization-mode=RBAC,Node",
		"--allow-privileged=true", "--endpoint-reconciler-type=none", "--enable-priority-and-fairness=false",
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
		// The request traces of k8s.io/utils/trace alone at verbosity 2: every request that
		// took over its threshold (500 ms for a write) is logged with its slower steps (a
		// patch applied again to the stored object shows as a step repeated), and nothing
		// else is added.
		"--vmodule=trace=2",
		// What fedbr's components ask of the cluster and what RBAC refuses them (audit.go).
		"--audit-policy-file=" + filepath.Join(dir, "audit-policy.yaml"), "--audit-log-path=" + AuditLogPath(dir),
		"--audit-log-format=json", "--audit-log-mode=blocking",
	}
	if err := os.WriteFile(filepath.Join(dir, "audit-policy.yaml"), []byte(auditPolicy), 0o600); err != nil {
		return c, err
	}
	if err := start(APIServer, apiPort, append(apiArgs, o.APIServerArgs[name]...)...); err != nil {
		return c, err
	}
	client, err := adminHTTPClient(p)
	if err != nil {
		return c, err
	}
	if err := waitHTTP(ctx, client, c.Server+"/readyz", o.ReadyTimeout, c.Processes...); err != nil {
		return c, fmt.Errorf("kube-apiserver not ready: %w (log: %s)", err, filepath.Join(dir, "logs", APIServer+".log"))
	}
	o.Log("%s: kube-apiserver ready on %s", name, c.Server)

	if err := start(ControllerManager, kcmPort,
		"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(kcmPort), "--leader-elect=false",
		"--service-account-private-key-file="+p.path(saKey), "--root-ca-file="+p.path(caCert),
		"--use-service-account-credentials=false",
		"--cert-dir="+filepath.Join(dir, "kcm-certs"),
	); err != nil {
		return c, err
	}
	if err := start(Scheduler, schedPort,
		"--kubeconfig="+c.Kubeconfig, "--authentication-kubeconfig="+c.Kubeconfig, "--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(schedPort), "--leader-elect=false",
		"--cert-dir="+filepath.Join(dir, "scheduler-certs"),
	); err != nil {
		return c, err
	}
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // loopback health probe of a self-signed lab endpoint
	for _, comp := range []struct {
		name string
		port int
	}{{ControllerManager, kcmPort}, {Scheduler, schedPort}} {
		if err := waitHTTP(ctx, insecure, "https://127.0.0.1:"+strconv.Itoa(comp.port)+"/healthz", o.ReadyTimeout, c.Processes...); err != nil {
			return c, fmt.Errorf("%s not healthy: %w (log: %s)", comp.name, err, filepath.Join(dir, "logs", comp.name+".log"))
		}
	}
	o.Log("%s: controller-manager and scheduler healthy", name)
	return c, nil
}

// waitHTTP polls url until it answers 200 or the timeout passes. When proc is given and exits
// meanwhile, it fails at once with the end of the process's log.
func waitHTTP(ctx context.Context, client *http.Client, url string, timeout time.Duration, proc ...Process) error {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
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
		for _, p := range proc {
			if !alive(p) {
				return fmt.Errorf("%s exited: %s", p.Component, logTail(p.Log, 5))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %s: %w", timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// adminHTTPClient reaches an API server as the lab's cluster admin.
func adminHTTPClient(p pki) (*http.Client, error) {
	cert, err := tls.LoadX509KeyPair(p.path(adminCert), p.path(adminKey))
	if err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(p.path(caCert))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", p.path(caCert))
	}
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12,
	}}}, nil
}

// writeKubeconfig writes one kubeconfig with a context per cluster, named after the cluster.
func writeKubeconfig(path string, clusters []Cluster) error {
	cfg := clientcmdapi.NewConfig()
	for _, c := range clusters {
		p := pki{dir: filepath.Join(c.Dir, "pki")}
		ca, err := os.ReadFile(p.path(caCert))
		if err != nil {
			return err
		}
		crt, err := os.ReadFile(p.path(adminCert))
		if err != nil {
			return err
		}
		key, err := os.ReadFile(p.path(adminKey))
		if err != nil {
			return err
		}
		cfg.Clusters[c.Name] = &clientcmdapi.Cluster{Server: c.Server, CertificateAuthorityData: ca}
		cfg.AuthInfos[c.Name+"-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
		cfg.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: c.Name + "-admin", Namespace: "default"}
		if cfg.CurrentContext == "" {
			cfg.CurrentContext = c.Name
		}
	}
	return clientcmd.WriteToFile(*cfg, path)
}

func (s *State) writeKubeconfig() error {
	return writeKubeconfig(s.Kubeconfig, s.Clusters)
}

func (s *State) save(dir string) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, StateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, StateFile))
}

// Load reads the state of the lab in dir.
func Load(dir string) (*State, error) {
	data, err := os.ReadFile(filepath.Join(dir, StateFile))
	if err != nil {
		return nil, err
	}
	st := &State{}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, StateFile), err)
	}
	return st, nil
}

// running lists the recorded pids that still run their recorded binary.
func (s *State) running() []int {
	var pids []int
	for _, c := range s.Clusters {
		for _, p := range c.Processes {
			if alive(p) {
				pids = append(pids, p.PID)
			}
		}
	}
	slices.Sort(pids)
	return pids
}

// logTail returns the last n lines of a log file, for error messages.
func logTail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
