package env

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/controlplane"
	"github.com/fedbr/fedbr/internal/lab/port"
)

// Names of what Install creates.
const (
	// InstallNamespace is the namespace of both charts' releases in every cluster, labelled
	// pod-security.kubernetes.io/enforce: restricted.
	InstallNamespace = "fedbr-system"
	// ManagerRelease and AgentRelease are the Helm releases, also the Deployments' names.
	ManagerRelease = "fedbr-manager"
	AgentRelease   = "fedbr-agent"
	// managerRemote is the agent chart's service account that the manager's data-plane
	// kubeconfig authenticates as (managerAccess.serviceAccount), with a bound token of
	// managerTokenLifetime.
	managerRemote        = "fedbr-manager-remote"
	managerTokenLifetime = 30 * 24 * time.Hour
	// PodSecurityEnforce is the Pod Security Admission label Install puts on InstallNamespace.
	PodSecurityEnforce = "pod-security.kubernetes.io/enforce"
)

// InstallOptions configure Install.
type InstallOptions struct {
	// Helm is the helm binary; default $FEDBR_HELM, else the one `make helm` builds into the
	// checkout's .cache/bin (DefaultHelm).
	Helm string
	// Charts holds fedbr-manager and fedbr-agent; default REPO/charts.
	Charts string
	// AllowNamespaces are the agents' extra policy entries (--allow-namespaces CONTROL=DATA,…,
	// the chart's policy.namespaces); the chart's default policy lets a member act on the
	// data-plane namespace named like its control-plane namespace.
	AllowNamespaces []string
	// WatchNamespaces sets the agent chart's watchNamespaces (--namespace): the agents reconcile
	// members only there, with their namespaced rights and the manager's as RoleBindings there;
	// and the manager chart's dataPlanes.namespaces (--dataplane-namespaces) to match. Empty:
	// every namespace, those rights cluster-wide.
	WatchNamespaces []string
	// PrivilegedWarmup sets the agent chart's policy.privilegedWarmup (--allow-privileged-warmup:
	// warm-ups that read block devices).
	PrivilegedWarmup bool
	// AgentArgs are the agent chart's extraArgs: flags added to every agent's command line.
	AgentArgs []string
	// Policy is merged into the agent chart's policy values (env, volumeTypes, podAnnotations, …).
	Policy map[string]any
	// StepRoleNamespaces are the data-plane namespaces where the agent chart creates the steps'
	// service account fedbr-br with the lab's step role (stepServiceAccount: StepRoleARN), so
	// their steps authenticate with IRSA through the lab nodes' stand-in for EKS's pod identity
	// webhook; elsewhere the agent makes fedbr-br without a role and steps get the nodes'
	// credentials. Each is created first when missing, as WatchNamespaces are.
	StepRoleNamespaces []string
	// PreflightStorage is the agent chart's preflight.storage: the storage its helm test checks
	// (default: none).
	PreflightStorage string
	// PreflightTidbClusters is the agent chart's preflight.tidbClusters (NAMESPACE/NAME each):
	// the TidbClusters its helm test checks as the agent (default: none).
	PreflightTidbClusters []string
	// SaveStepLogs is the agent chart's saveStepLogs (--save-step-logs).
	SaveStepLogs bool
	// Timeout bounds each wait; default 2 minutes.
	Timeout time.Duration
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// DefaultHelm is $FEDBR_HELM, else root/.cache/bin/helm-<version pinned in root's
// hack/tools/helm>, where `make helm` builds it.
func DefaultHelm(root string) (string, error) {
	if p := os.Getenv("FEDBR_HELM"); p != "" {
		return p, nil
	}
	f, err := os.Open(filepath.Join(root, "hack", "tools", "helm", "go.mod"))
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	for s := bufio.NewScanner(f); s.Scan(); {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "helm.sh/helm/v3" {
			return filepath.Join(root, ".cache", "bin", "helm-"+fields[1]), nil
		}
	}
	return "", errors.New("hack/tools/helm/go.mod requires no helm.sh/helm/v3")
}

func (o InstallOptions) withDefaults() (InstallOptions, error) {
	if o.Helm == "" {
		h, err := DefaultHelm(RepoRoot())
		if err != nil {
			return o, err
		}
		o.Helm = h
	}
	if o.Charts == "" {
		o.Charts = filepath.Join(RepoRoot(), "charts")
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if st, err := os.Stat(o.Helm); err != nil || st.IsDir() {
		return o, fmt.Errorf("helm %s: not a file (run `make helm`, or set $FEDBR_HELM)", o.Helm)
	}
	for _, c := range []string{ManagerRelease, AgentRelease} {
		if _, err := os.Stat(filepath.Join(o.Charts, c, "Chart.yaml")); err != nil {
			return o, fmt.Errorf("chart %s: %w", c, err)
		}
	}
	return o, nil
}

// Install installs fedbr into the running lab l through its Helm charts, with the real helm
// binary, as a user installs it: charts/fedbr-agent into every data plane and
// charts/fedbr-manager into the control cluster, each release in namespace fedbr-system
// labelled pod-security.kubernetes.io/enforce: restricted, so the API server admits only pods
// that pass the restricted Pod Security Standard. The charts' image (ghcr.io/fedbr/fedbr) is
// mapped by the lab nodes' rule */fedbr to the lab's fedbr-lab binary; the pods find their
// service-account token under $FEDBR_LAB_ROOT (package podenv). The control cluster gets one
// lab node (without an AWS instance) to run the manager. Each agent gets the AWS double's
// endpoint and region (its node gives it the lab's credentials); the manager's data-plane
// kubeconfig (the chart's Secret) has one context per data plane: its API server on loopback
// and the token of the agent chart's fedbr-manager-remote service account, except the EKS
// authenticator's plane (Lab.EKSAuth), whose user is "aws eks get-token" and is bound there
// through the agent chart's managerAccess.subjects; the manager then gets the lab's AWS
// credentials in its environment (the chart's extraEnv) to sign those tokens. Metrics are off,
// health probes listen on free ports (every pod shares the host network). Install returns once
// every Deployment is Available; it can run again on the same lab (helm upgrade --install).
func Install(ctx context.Context, l *Lab, o InstallOptions) error {
	o, err := o.withDefaults()
	if err != nil {
		return err
	}
	start := time.Now()
	log := func(format string, args ...any) {
		o.Log("[%5.1fs] "+format, append([]any{time.Since(start).Seconds()}, args...)...)
	}
	in := &installer{l: l, o: o, log: log, helmHome: filepath.Join(l.Dir, "helm")}
	if err := parallel(in.controlNode(ctx), in.namespaces(ctx)); err != nil {
		return err
	}
	ports, err := port.Free(len(l.DataPlanes) + 1)
	if err != nil {
		return err
	}
	var agents []func() error
	for i, d := range l.DataPlanes {
		agents = append(agents, func() error { return in.agent(ctx, d, ports[i+1]) })
	}
	if err := parallel(agents...); err != nil {
		return err
	}
	kubeconfig, err := in.dataPlaneKubeconfig(ctx)
	if err != nil {
		return err
	}
	if err := in.manager(ctx, kubeconfig, ports[0]); err != nil {
		return err
	}
	log("fedbr installed through its charts in %s of every cluster", InstallNamespace)
	return nil
}

type installer struct {
	l        *Lab
	o        InstallOptions
	log      func(format string, args ...any)
	helmHome string
}

func (in *installer) client(cluster string) (kubernetes.Interface, error) {
	cfg, err := in.l.Config(cluster)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// controlNode starts the control cluster's node, unless one runs already.
func (in *installer) controlNode(ctx context.Context) func() error {
	return func() error {
		if len(in.l.ControlNodes) > 0 && in.l.ControlNodes[0].Process.Running() {
			return nil
		}
		control := in.l.Control
		n := Node{Name: control + "-node-0", Dir: filepath.Join(in.l.Dir, control, "nodes", control+"-node-0")}
		kubeconfig := filepath.Join(in.l.Dir, control, "kubeconfig")
		args := []string{"lab", "node", "--kubeconfig", kubeconfig, "--context", control, "--name", n.Name, "--dir", n.Dir,
			"--shutdown-grace", nodeShutdownGrace.String(), "--image", "fedbr=" + in.l.Fedbr, "--image", "*/fedbr=" + in.l.Fedbr}
		p, err := controlplane.Spawn(controlplane.Command{
			Binary: in.l.Fedbr, Dir: in.l.Dir, Log: filepath.Join(in.l.Dir, control, "logs", "node-"+n.Name+".log"),
			Component: ComponentNode, Args: args,
		})
		n.Process = p
		in.l.ControlNodes = []Node{n}
		if serr := in.l.save(); serr != nil {
			err = errors.Join(err, serr)
		}
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		cfg, err := in.l.Config(control)
		if err != nil {
			return err
		}
		if err := waitNodes(ctx, cfg, in.l.ControlNodes, in.o.Timeout); err != nil {
			return err
		}
		in.log("%s: node %s ready (for the manager)", control, n.Name)
		return nil
	}
}

// namespaces creates fedbr-system in every cluster, enforcing the restricted Pod Security
// Standard, and in the data planes each of WatchNamespaces that is missing, as an operator
// who lists them creates them first (the agent chart binds its rights in them; Helm cannot
// create a RoleBinding in a namespace that does not exist). An existing one is left as it is;
// a new one enforces restricted until `lab tidb` sets its own level.
func (in *installer) namespaces(ctx context.Context) func() error {
	return func() error {
		var fns []func() error
		for _, cluster := range in.l.Contexts {
			fns = append(fns, func() error {
				cfg, err := in.l.Config(cluster)
				if err != nil {
					return err
				}
				c, err := client.New(cfg, client.Options{})
				if err != nil {
					return err
				}
				if err := EnsureNamespace(ctx, c, InstallNamespace, "restricted"); err != nil {
					return fmt.Errorf("%s: %w", cluster, err)
				}
				if cluster == in.l.Control {
					return nil
				}
				for _, ns := range slices.Concat(in.o.WatchNamespaces, in.o.StepRoleNamespaces) {
					n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{PodSecurityEnforce: "restricted"}}}
					if err := c.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
						return fmt.Errorf("%s: namespace %s: %w", cluster, ns, err)
					}
				}
				return nil
			})
		}
		if err := parallel(fns...); err != nil {
			return err
		}
		in.log("namespace %s (%s=restricted) in %v", InstallNamespace, PodSecurityEnforce, in.l.Contexts)
		return nil
	}
}

// agent installs charts/fedbr-agent into data plane d and waits until it is Available.
func (in *installer) agent(ctx context.Context, d DataPlane, healthPort int) error {
	values := map[string]any{
		"clusterName": d.Cluster,
		"aws":         map[string]any{"region": in.l.AWS.Region, "endpoint": in.l.AWS.Endpoint},
		"metrics":     map[string]any{"enabled": false},
		"health":      map[string]any{"port": healthPort},
		"verbosity":   1,
		// The manager's kubeconfig for this plane authenticates as this account's token.
		"managerAccess": map[string]any{"serviceAccount": map[string]any{"create": true, "name": managerRemote}},
	}
	if a := in.l.EKSAuth; a != nil && a.Cluster == d.Cluster {
		// Here it authenticates with an EKS token instead, as the user the lab's AWS
		// identity maps to: bound as EKS users bind an aws-auth mapping's user.
		values["managerAccess"].(map[string]any)["subjects"] = []any{
			map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": a.User},
		}
	}
	if len(in.o.WatchNamespaces) > 0 {
		values["watchNamespaces"] = in.o.WatchNamespaces
	}
	policy := map[string]any{}
	if len(in.o.AllowNamespaces) > 0 {
		policy["namespaces"] = in.o.AllowNamespaces
	}
	if in.o.PrivilegedWarmup {
		policy["privilegedWarmup"] = true
	}
	maps.Copy(policy, in.o.Policy)
	if len(in.o.StepRoleNamespaces) > 0 {
		values["stepServiceAccount"] = map[string]any{"namespaces": in.o.StepRoleNamespaces, "roleArn": StepRoleARN()}
	}
	if len(policy) > 0 {
		values["policy"] = policy
	}
	if in.o.SaveStepLogs {
		values["saveStepLogs"] = true
	}
	if in.o.PreflightStorage != "" || len(in.o.PreflightTidbClusters) > 0 {
		values["preflight"] = map[string]any{"storage": in.o.PreflightStorage, "tidbClusters": in.o.PreflightTidbClusters}
	}
	if len(in.o.AgentArgs) > 0 {
		values["extraArgs"] = in.o.AgentArgs
	}
	t := time.Now()
	cfg, err := in.l.Config(d.Cluster)
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := adoptStatusGuard(ctx, dyn, AgentRelease, InstallNamespace); err != nil {
		return err
	}
	if err := in.helm(ctx, d.Cluster, AgentRelease, values); err != nil {
		return err
	}
	in.log("%s: helm installed %s in %s", d.Cluster, AgentRelease, time.Since(t).Round(time.Millisecond))
	if err := in.waitAvailable(ctx, d.Cluster, AgentRelease); err != nil {
		return err
	}
	in.log("%s: Deployment %s/%s Available %s after its helm install", d.Cluster, InstallNamespace, AgentRelease, time.Since(t).Round(time.Millisecond))
	return nil
}

// manager installs charts/fedbr-manager into the control cluster with the data planes'
// kubeconfig and waits until it is Available.
func (in *installer) manager(ctx context.Context, kubeconfig []byte, healthPort int) error {
	values := map[string]any{
		// One replica: each would listen on the same health port of the shared host network.
		"replicas":       1,
		"dataPlanes":     map[string]any{"kubeconfig": string(kubeconfig), "namespaces": in.o.WatchNamespaces},
		"metrics":        map[string]any{"enabled": false},
		"health":         map[string]any{"port": healthPort},
		"probeInterval":  "1s",
		"logDevelopment": true,
		"verbosity":      1,
	}
	if in.l.EKSAuth != nil {
		// The manager signs the EKS plane's tokens with the lab's credentials (it calls no
		// AWS API: the plane's authenticator calls STS).
		var env []any
		for _, kv := range awsdouble.CredentialsEnv() {
			k, v, _ := strings.Cut(kv, "=")
			env = append(env, map[string]any{"name": k, "value": v})
		}
		values["extraEnv"] = env
	}
	t := time.Now()
	if err := in.helm(ctx, in.l.Control, ManagerRelease, values); err != nil {
		return err
	}
	in.log("%s: helm installed %s in %s", in.l.Control, ManagerRelease, time.Since(t).Round(time.Millisecond))
	if err := in.waitAvailable(ctx, in.l.Control, ManagerRelease); err != nil {
		return err
	}
	in.log("%s: Deployment %s/%s Available %s after its helm install", in.l.Control, InstallNamespace, ManagerRelease, time.Since(t).Round(time.Millisecond))
	return nil
}

// helm runs `helm upgrade --install` of chart (also the release's name) into cluster.
func (in *installer) helm(ctx context.Context, cluster, chart string, values map[string]any) error {
	data, err := yaml.Marshal(values)
	if err != nil {
		return err
	}
	dir := filepath.Join(in.helmHome, cluster)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	file := filepath.Join(dir, chart+"-values.yaml")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, in.o.Helm, "upgrade", "--install", chart, filepath.Join(in.o.Charts, chart),
		"--kubeconfig", in.l.Kubeconfig, "--kube-context", cluster, "--namespace", InstallNamespace, "--values", "-")
	// Through stdin: helm splits --values at commas, which a lab's path may hold. The file
	// stays as the record of what was installed.
	cmd.Stdin = bytes.NewReader(data)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(in.helmHome, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(in.helmHome, "config"), "HELM_DATA_HOME="+filepath.Join(in.helmHome, "data"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: helm upgrade --install %s: %w: %s", cluster, chart, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitAvailable waits until the Deployment name in fedbr-system of cluster has all its
// replicas updated and Available; while it waits it names what its pods wait for.
func (in *installer) waitAvailable(ctx context.Context, cluster, name string) error {
	cs, err := in.client(cluster)
	if err != nil {
		return err
	}
	err = poll(ctx, in.o.Timeout, func() (bool, string, error) {
		dep, err := cs.AppsV1().Deployments(InstallNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, "", err
		}
		want := int32(1)
		if dep.Spec.Replicas != nil {
			want = *dep.Spec.Replicas
		}
		available := false
		for _, c := range dep.Status.Conditions {
			available = available || (c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue)
		}
		if dep.Status.ObservedGeneration >= dep.Generation && available && dep.Status.UpdatedReplicas == want &&
			dep.Status.AvailableReplicas == want && dep.Status.Replicas == want {
			return true, "", nil
		}
		return false, fmt.Sprintf("Deployment %s: %d/%d available; %s", name, dep.Status.AvailableReplicas, want, in.podsWaiting(ctx, cs, dep)), nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", cluster, err)
	}
	return nil
}

// podsWaiting says why a Deployment is not available yet: its ReplicaSets' failures (a pod the
// restricted policy refuses shows here) and its pods' states.
func (in *installer) podsWaiting(ctx context.Context, cs kubernetes.Interface, dep *appsv1.Deployment) string {
	var out []string
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentReplicaFailure && c.Status == corev1.ConditionTrue {
			out = append(out, c.Message)
		}
	}
	sel := metav1.FormatLabelSelector(dep.Spec.Selector)
	if rss, err := cs.AppsV1().ReplicaSets(InstallNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil {
		for _, rs := range rss.Items {
			for _, c := range rs.Status.Conditions {
				if c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
					out = append(out, "ReplicaSet "+rs.Name+": "+c.Message)
				}
			}
		}
	}
	if pods, err := cs.CoreV1().Pods(InstallNamespace).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil {
		for _, p := range pods.Items {
			s := "pod " + p.Name + " " + string(p.Status.Phase)
			for _, c := range p.Status.ContainerStatuses {
				if w := c.State.Waiting; w != nil {
					s += " " + w.Reason + ": " + w.Message
				}
				if t := c.State.Terminated; t != nil {
					s += fmt.Sprintf(" exited %d", t.ExitCode)
				}
			}
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		return "no pod yet"
	}
	return strings.Join(out, "; ")
}

// dataPlaneKubeconfig is the manager's kubeconfig: a context per data plane, named after it
// (the k8sClusterName), with the plane's API server (on loopback, reachable from the manager's
// pod process) and a bound token (TokenRequest) of fedbr-manager-remote, bound there to fedbr-manager-dataplane;
// the EKS authenticator's plane (Lab.EKSAuth) has instead the exec user EKS's own kubeconfigs
// have ("aws eks get-token --cluster-name PLANE --region REGION"), whose tokens the manager
// mints in-process (package ekstoken) and whose user is bound there to the same role.
func (in *installer) dataPlaneKubeconfig(ctx context.Context) ([]byte, error) {
	raw, err := clientcmd.LoadFromFile(in.l.Kubeconfig)
	if err != nil {
		return nil, err
	}
	out := clientcmdapi.NewConfig()
	for _, d := range in.l.DataPlanes {
		kctx := raw.Contexts[d.Cluster]
		if kctx == nil || raw.Clusters[kctx.Cluster] == nil {
			return nil, fmt.Errorf("no cluster %q in %s", d.Cluster, in.l.Kubeconfig)
		}
		if a := in.l.EKSAuth; a != nil && a.Cluster == d.Cluster {
			out.Clusters[d.Cluster] = &clientcmdapi.Cluster{Server: raw.Clusters[kctx.Cluster].Server,
				CertificateAuthorityData: raw.Clusters[kctx.Cluster].CertificateAuthorityData}
			out.AuthInfos[d.Cluster] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
				APIVersion: "client.authentication.k8s.io/v1beta1", Command: "aws",
				Args:            []string{"eks", "get-token", "--cluster-name", d.Cluster, "--region", in.l.AWS.Region},
				InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			}}
			out.Contexts[d.Cluster] = &clientcmdapi.Context{Cluster: d.Cluster, AuthInfo: d.Cluster, Namespace: InstallNamespace}
			continue
		}
		cs, err := in.client(d.Cluster)
		if err != nil {
			return nil, err
		}
		// As docs/install.md builds it: the cluster's CA from ConfigMap kube-root-ca.crt and a
		// bound token of the service account, minted by TokenRequest (kubectl create token).
		var ca []byte
		err = poll(ctx, in.o.Timeout, func() (bool, string, error) {
			cm, err := cs.CoreV1().ConfigMaps(InstallNamespace).Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, "the root CA publisher to make ConfigMap kube-root-ca.crt", nil
			}
			if err != nil {
				return false, "", err
			}
			ca = []byte(cm.Data["ca.crt"])
			return len(ca) > 0, "ConfigMap kube-root-ca.crt to carry ca.crt", nil
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.Cluster, err)
		}
		secs := int64(managerTokenLifetime / time.Second)
		tr, err := cs.CoreV1().ServiceAccounts(InstallNamespace).CreateToken(ctx, managerRemote,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("%s: a token for %s/%s: %w", d.Cluster, InstallNamespace, managerRemote, err)
		}
		token := tr.Status.Token
		out.Clusters[d.Cluster] = &clientcmdapi.Cluster{Server: raw.Clusters[kctx.Cluster].Server, CertificateAuthorityData: ca}
		out.AuthInfos[d.Cluster] = &clientcmdapi.AuthInfo{Token: token}
		out.Contexts[d.Cluster] = &clientcmdapi.Context{Cluster: d.Cluster, AuthInfo: d.Cluster, Namespace: InstallNamespace}
	}
	names := make([]string, 0, len(in.l.DataPlanes))
	for _, d := range in.l.DataPlanes {
		names = append(names, d.Cluster)
	}
	slices.Sort(names)
	out.CurrentContext = names[0]
	data, err := clientcmd.Write(*out)
	if err != nil {
		return nil, err
	}
	if a := in.l.EKSAuth; a != nil {
		in.log("manager's data-plane kubeconfig: contexts %v, tokens of %s/%s but %s's, \"aws eks get-token\" (as %s)",
			names, InstallNamespace, managerRemote, a.Cluster, a.User)
	} else {
		in.log("manager's data-plane kubeconfig: contexts %v, tokens of %s/%s", names, InstallNamespace, managerRemote)
	}
	return data, nil
}
