// Package charts tests charts/fedbr-manager and charts/fedbr-agent: linted and rendered by the
// pinned helm CLI with their default values and with every optional feature on, their output
// parsed as Kubernetes objects and held to the rest of the repository: the CRDs and
// ClusterRoles are config/'s, the Deployments pass flags the commands accept (every flag is
// reachable through values), and every pod template passes Pod Security "restricted".
package charts

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/agent/job"
	agentcmd "github.com/fedbr/fedbr/internal/cmd/agent"
	brpreflight "github.com/fedbr/fedbr/internal/cmd/br/preflight"
	managercmd "github.com/fedbr/fedbr/internal/cmd/manager"
	"github.com/fedbr/fedbr/internal/metrics"
	"github.com/fedbr/fedbr/internal/podsecurity"
	"github.com/fedbr/fedbr/internal/testenv"
)

var (
	manager = chart{name: "fedbr-manager", release: "fedbr-manager", namespace: "fedbr-system"}
	agent   = chart{name: "fedbr-agent", release: "fedbr-agent", namespace: "fedbr-system"}
)

// dressed are the values both charts take to place and dress their pod, all set; checkDressed
// checks a pod made with them.
func dressed(more map[string]any) map[string]any {
	v := map[string]any{
		"image": map[string]any{"repository": "registry.example.com/fedbr", "tag": "v9.9.9", "pullPolicy": "Always",
			"pullSecrets": []any{"registry"}},
		"resources":    map[string]any{"requests": map[string]any{"cpu": "200m", "memory": "200Mi"}, "limits": map[string]any{"memory": "2Gi"}},
		"nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
		"tolerations":  []any{map[string]any{"key": "dedicated", "value": "fedbr", "effect": "NoSchedule"}},
		"affinity": map[string]any{"nodeAffinity": map[string]any{"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
			"nodeSelectorTerms": []any{map[string]any{"matchExpressions": []any{map[string]any{"key": "pool", "operator": "In", "values": []any{"system"}}}}}}}},
		"podAnnotations":    map[string]any{"example.com/owner": "dba"},
		"podLabels":         map[string]any{"team": "db"},
		"extraEnv":          []any{map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}},
		"extraVolumes":      []any{map[string]any{"name": "config", "secret": map[string]any{"secretName": "kubeconfig"}}},
		"extraVolumeMounts": []any{map[string]any{"name": "config", "mountPath": "/etc/fedbr/config", "readOnly": true}},
		"metrics": map[string]any{"port": 9090, "serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
			"certDir": "/etc/fedbr/metrics-certs", "readers": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}}},
		"health":   map[string]any{"port": 9091},
		"replicas": 3,
	}
	maps.Copy(v, more)
	return v
}

func checkDressed(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	pod := d.Spec.Template
	c := pod.Spec.Containers[0]
	got := map[string]bool{
		"image":         c.Image == "registry.example.com/fedbr:v9.9.9" && c.ImagePullPolicy == corev1.PullAlways,
		"pullSecrets":   slices.Equal(pod.Spec.ImagePullSecrets, []corev1.LocalObjectReference{{Name: "registry"}}),
		"resources":     c.Resources.Requests.Cpu().String() == "200m" && c.Resources.Limits.Memory().String() == "2Gi",
		"nodeSelector":  pod.Spec.NodeSelector["kubernetes.io/os"] == "linux",
		"tolerations":   len(pod.Spec.Tolerations) == 1 && pod.Spec.Tolerations[0].Key == "dedicated",
		"affinity":      pod.Spec.Affinity != nil && pod.Spec.Affinity.NodeAffinity != nil,
		"annotations":   pod.Annotations["example.com/owner"] == "dba",
		"labels":        pod.Labels["team"] == "db",
		"env":           slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "HTTPS_PROXY" }),
		"volume":        slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == "config" }),
		"volumeMount":   slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/etc/fedbr/config" }),
		"ports":         slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 9090 }),
		"replicas":      d.Spec.Replicas != nil && *d.Spec.Replicas == 3,
		"healthProbes":  c.LivenessProbe != nil && c.LivenessProbe.HTTPGet.Port.String() == "health",
		"healthPort":    slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "health" && p.ContainerPort == 9091 }),
		"selectorLabel": pod.Labels["app.kubernetes.io/instance"] != "",
	}
	for what, ok := range got {
		if !ok {
			t.Errorf("Deployment %s: %s not as the values say", d.Name, what)
		}
	}
}

// defaultImage is a chart's default image: fedbr's at the chart's appVersion.
func defaultImage(t *testing.T, c chart) string {
	t.Helper()
	var meta struct {
		AppVersion string `json:"appVersion"`
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "charts", c.name, "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &meta); err != nil || meta.AppVersion == "" {
		t.Fatalf("%s/Chart.yaml: no appVersion (%v)", c.name, err)
	}
	return "ghcr.io/fedbr/fedbr:" + meta.AppVersion
}

// checkDefaultPod checks a pod made with default values.
func checkDefaultPod(t *testing.T, c chart, d *appsv1.Deployment) {
	t.Helper()
	if ctr := d.Spec.Template.Spec.Containers[0]; ctr.Image != defaultImage(t, c) {
		t.Errorf("image %s, want %s", ctr.Image, defaultImage(t, c))
	}
	if len(d.Spec.Template.Spec.ImagePullSecrets) != 0 || len(d.Spec.Template.Spec.Tolerations) != 0 {
		t.Errorf("pull secrets %v, tolerations %v by default", d.Spec.Template.Spec.ImagePullSecrets, d.Spec.Template.Spec.Tolerations)
	}
}

// checkMonitoring checks the metrics Service, the ClusterRole that may read the secure endpoint
// (the default) and, when serviceMonitor, its ServiceMonitor, scraping over HTTPS with its
// service account's token, and the reader role bound to the values' metrics.readers.
func checkMonitoring(t *testing.T, objs objects, name string, port int32, serviceMonitor bool) {
	t.Helper()
	var svc corev1.Service
	objs.get(t, "Service", name+"-metrics", &svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.String() != "metrics" || svc.Spec.Ports[0].Port != port {
		t.Errorf("metrics Service ports %+v", svc.Spec.Ports)
	}
	var reader rbacv1.ClusterRole
	objs.get(t, "ClusterRole", name+"-metrics-reader", &reader)
	if want := []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}; !equality.Semantic.DeepEqual(reader.Rules, want) {
		t.Errorf("metrics reader rules %+v, want get on /metrics", reader.Rules)
	}
	if !serviceMonitor {
		if n := len(objs.all("ServiceMonitor")); n != 0 {
			t.Errorf("%d ServiceMonitors, want none", n)
		}
		return
	}
	sm := objs.get(t, "ServiceMonitor", name, nil)
	if sm.GetLabels()["release"] != "prom" {
		t.Errorf("ServiceMonitor labels %v", sm.GetLabels())
	}
	ep, _, _ := unstructured.NestedSlice(sm.Object, "spec", "endpoints")
	if len(ep) != 1 || ep[0].(map[string]any)["scheme"] != "https" || ep[0].(map[string]any)["bearerTokenFile"] == nil {
		t.Errorf("ServiceMonitor endpoints %v: want https with the service account's token", ep)
	}
	if !bound(t, objs, name+"-metrics-reader", "prometheus-k8s", "monitoring") {
		t.Errorf("metrics.readers not bound to %s-metrics-reader", name)
	}
}

// install is what checkInstall holds a chart's rendered objects to.
type install struct {
	// crds is a glob of config/crd/bases: the chart's CRDs are these.
	crds string
	// roles are files of config/rbac: the chart's ClusterRoles are these.
	roles []string
	// role is the ClusterRole bound to the Deployment's service account.
	role string
	// deployment and args: the Deployment's name and its container's arguments.
	deployment string
	args       []string
}

// checkInstall checks what every install of a chart holds and returns its Deployment.
func checkInstall(t *testing.T, c chart, objs objects, want install) *appsv1.Deployment {
	t.Helper()
	crds := readObjects(t, want.crds)
	if got := objs.all("CustomResourceDefinition"); len(got) != len(crds) {
		t.Errorf("%d CRDs rendered, want %d (%s)", len(got), len(crds), want.crds)
	}
	for _, crd := range crds {
		if got := objs.get(t, "CustomResourceDefinition", crd.GetName(), nil); !equality.Semantic.DeepEqual(got.Object, crd.Object) {
			t.Errorf("CRD %s differs from %s: run make generate", crd.GetName(), want.crds)
		}
	}

	var roles objects
	for _, f := range want.roles {
		roles = append(roles, readObjects(t, f)...)
	}
	// Besides config/rbac's roles, the chart renders <release>-metrics-reader (checkMonitoring).
	if got := objs.all("ClusterRole"); len(got) != len(roles)+1 {
		t.Errorf("%d ClusterRoles rendered, want %d (%v and the metrics reader)", len(got), len(roles)+1, want.roles)
	}
	for _, r := range roles {
		var have, wantRole rbacv1.ClusterRole
		objs.get(t, "ClusterRole", r.GetName(), &have)
		as(t, r, &wantRole)
		if !equality.Semantic.DeepEqual(have.Rules, wantRole.Rules) {
			t.Errorf("ClusterRole %s: rules differ from config/rbac: %s", r.GetName(), cmp.Diff(wantRole.Rules, have.Rules))
		}
	}

	var d appsv1.Deployment
	objs.get(t, "Deployment", want.deployment, &d)
	pod := &d.Spec.Template
	if err := podsecurity.Check(podsecurity.Restricted, &pod.ObjectMeta, &pod.Spec); err != nil {
		t.Errorf("Deployment %s: %v", d.Name, err)
	}
	for _, ctr := range pod.Spec.Containers {
		if sc := ctr.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("Deployment %s, container %s: root file system not read-only", d.Name, ctr.Name)
		}
	}
	if got := pod.Spec.Containers[0].Args; !slices.Equal(got, want.args) {
		t.Errorf("Deployment %s args:\n got %q\nwant %q", d.Name, got, want.args)
	}
	if !bound(t, objs, want.role, pod.Spec.ServiceAccountName, c.namespace) {
		t.Errorf("no ClusterRoleBinding of %s to service account %s/%s", want.role, c.namespace, pod.Spec.ServiceAccountName)
	}
	objs.get(t, "ServiceAccount", pod.Spec.ServiceAccountName, nil)
	checkLeases(t, objs, want.args, pod.Spec.ServiceAccountName, c.namespace)
	return &d
}

// checkLeases: the leader election Lease is the only one a component writes, in the namespace
// --leader-election-namespace names; so no ClusterRole grants leases, and a Role there grants
// what client-go's Lease lock calls (get, create, update) to the component's service account.
func checkLeases(t *testing.T, objs objects, args []string, sa, saNamespace string) {
	t.Helper()
	for _, obj := range objs.all("ClusterRole") {
		var r rbacv1.ClusterRole
		as(t, obj, &r)
		for _, rule := range r.Rules {
			if slices.Contains(rule.Resources, "leases") {
				t.Errorf("ClusterRole %s grants leases %v in every namespace; want a Role in the Lease's namespace only", r.Name, rule.Verbs)
			}
		}
	}
	var ns string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--leader-election-namespace="); ok {
			ns = v
		}
	}
	if ns == "" {
		return
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}}}
	var granted bool
	for _, obj := range objs.all("RoleBinding") {
		var b rbacv1.RoleBinding
		if as(t, obj, &b); b.Namespace != ns || b.RoleRef.Kind != "Role" ||
			!slices.Contains(b.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: saNamespace}) {
			continue
		}
		for _, ro := range objs.all("Role") {
			var r rbacv1.Role
			if as(t, ro, &r); r.Namespace == ns && r.Name == b.RoleRef.Name {
				granted = equality.Semantic.DeepEqual(r.Rules, want)
				if !granted {
					t.Errorf("Role %s/%s: %s", ns, r.Name, cmp.Diff(want, r.Rules))
				}
			}
		}
	}
	if !granted {
		t.Errorf("no Role in %s, bound to %s/%s, grants the leader election Lease", ns, saNamespace, sa)
	}
}

// bound tells whether a ClusterRoleBinding binds role to service account namespace/name.
func bound(t *testing.T, objs objects, role, name, namespace string) bool {
	t.Helper()
	for _, obj := range objs.all("ClusterRoleBinding") {
		var b rbacv1.ClusterRoleBinding
		if as(t, obj, &b); b.RoleRef.Name != role {
			continue
		}
		for _, s := range b.Subjects {
			if s.Kind == rbacv1.ServiceAccountKind && s.Name == name && s.Namespace == namespace {
				return true
			}
		}
	}
	return false
}

// checkEveryFlag checks that args set every flag of cmd but those in except.
func checkEveryFlag(t *testing.T, cmd *cobra.Command, args []string, except ...string) {
	t.Helper()
	set := map[string]bool{}
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		set[name] = true
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !set[f.Name] && !slices.Contains(except, f.Name) {
			t.Errorf("flag --%s of `fedbr %s` cannot be set through the chart's values", f.Name, cmd.Name())
		}
	})
}

// chartCase is a chart installed with values: its Deployment's args, and what else to check.
type chartCase struct {
	name   string
	values map[string]any
	args   []string
	check  func(t *testing.T, objs objects, d *appsv1.Deployment)
}

func TestManagerChart(t *testing.T) {
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n"
	for _, tt := range []chartCase{{
		name: "defaults",
		args: []string{"manager", "--kubeconfig=/etc/fedbr/dataplanes/kubeconfig", "--agent-namespace=fedbr-system", "--metrics-bind-address=:8080", "--metrics-secure=true", "--health-probe-bind-address=:8081",
			"--leader-elect=true", "--leader-election-namespace=fedbr-system", "--probe-interval=5s", "--reload-check=10s", "--log-development=false", "--v=0"},
		check: func(t *testing.T, objs objects, d *appsv1.Deployment) {
			checkDefaultPod(t, manager, d)
			checkMonitoring(t, objs, "fedbr-manager", 8080, false)
			for _, kind := range []string{"Secret", "PrometheusRule"} {
				if n := len(objs.all(kind)); n != 0 {
					t.Errorf("%d %s rendered, want none by default", n, kind)
				}
			}
			if v := d.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "fedbr-dataplanes" {
				t.Errorf("the data planes' kubeconfig comes from %+v, want Secret fedbr-dataplanes", v)
			}
			if *d.Spec.Replicas != 2 {
				t.Errorf("%d replicas by default, want 2 (leader election)", *d.Spec.Replicas)
			}
		},
	}, {
		name: "everything on",
		values: dressed(map[string]any{
			"dataPlanes":     map[string]any{"secretName": "planes", "key": "config", "kubeconfig": kubeconfig, "namespaces": []any{"tidb", "tidb-restore"}, "agentNamespace": "fedbr-agents"},
			"controlPlane":   map[string]any{"kubeconfig": "/etc/fedbr/config/kubeconfig", "context": "hub"},
			"leaderElection": map[string]any{"namespace": "leases"},
			"watchNamespace": "tidb-backup",
			"probeInterval":  "2s",
			"reloadCheck":    "30s",
			"logDevelopment": true,
			"verbosity":      1,
			"extraArgs":      []any{"--probe-interval=3s"},
			"metrics": map[string]any{"port": 9090, "serviceMonitor": map[string]any{"enabled": true, "labels": map[string]any{"release": "prom"}},
				"certDir": "/etc/fedbr/metrics-certs", "readers": []any{map[string]any{"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}},
				"prometheusRule": map[string]any{"enabled": true}, "grafanaDashboard": map[string]any{"enabled": true}},
			"serviceAccount": map[string]any{"name": "fedbr-hub", "annotations": map[string]any{"example.com/a": "b"}},
		}),
		args: []string{"manager", "--kubeconfig=/etc/fedbr/dataplanes/config", "--dataplane-namespaces=tidb,tidb-restore", "--agent-namespace=fedbr-agents", "--control-kubeconfig=/etc/fedbr/config/kubeconfig", "--control-context=hub",
			"--namespace=tidb-backup", "--metrics-bind-address=:9090", "--metrics-secure=true", "--metrics-cert-dir=/etc/fedbr/metrics-certs", "--health-probe-bind-address=:9091", "--leader-elect=true",
			"--leader-election-namespace=leases", "--probe-interval=2s", "--reload-check=30s", "--log-development=true", "--v=1", "--probe-interval=3s"},
		check: func(t *testing.T, objs objects, d *appsv1.Deployment) {
			checkDressed(t, d)
			checkMonitoring(t, objs, "fedbr-manager", 8080, true)
			checkEveryFlag(t, managercmd.NewCmd(), d.Spec.Template.Spec.Containers[0].Args)
			var s corev1.Secret
			objs.get(t, "Secret", "planes", &s)
			if string(s.Data["config"]) != kubeconfig {
				t.Errorf("Secret planes holds %q under config, want the kubeconfig", s.Data["config"])
			}
			if v := d.Spec.Template.Spec.Volumes[0]; v.Secret == nil || v.Secret.SecretName != "planes" {
				t.Errorf("the data planes' kubeconfig comes from %+v, want Secret planes", v)
			}
			if sa := objs.get(t, "ServiceAccount", "fedbr-hub", nil); sa.GetAnnotations()["example.com/a"] != "b" {
				t.Errorf("service account annotations %v", sa.GetAnnotations())
			}
			checkRules(t, objs)
			checkDashboard(t, objs)
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			manager.lint(t, tt.values)
			objs := manager.template(t, tt.values)
			d := checkInstall(t, manager, objs, install{crds: "config/crd/bases/federation.pingcap.com_*.yaml",
				roles: []string{"config/rbac/manager_role.yaml"}, role: "fedbr-manager", deployment: "fedbr-manager", args: tt.args})
			// The real command takes every argument.
			if err := managercmd.NewCmd().ParseFlags(tt.args[1:]); err != nil {
				t.Errorf("fedbr manager refuses the chart's arguments: %v", err)
			}
			tt.check(t, objs, d)
		})
	}

	t.Run("two replicas without leader election", func(t *testing.T) {
		out, err := manager.run(t, map[string]any{"leaderElection": map[string]any{"enabled": false}}, "template", manager.release, manager.name)
		if err == nil || !strings.Contains(out, "replicas > 1 needs leaderElection.enabled") {
			t.Errorf("rendered (%v):\n%s", err, out)
		}
	})
}

// checkRules checks that the PrometheusRule carries the groups of the chart's
// files/prometheus-rules.yaml, the one place fedbr's alerts are written.
func checkRules(t *testing.T, objs objects) {
	t.Helper()
	var rule struct {
		Spec struct {
			Groups []any `json:"groups"`
		} `json:"spec"`
	}
	objs.get(t, "PrometheusRule", "fedbr-manager", &rule)
	var file struct {
		Groups []any `json:"groups"`
	}
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "charts", "fedbr-manager", "files", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Groups) == 0 || !equality.Semantic.DeepEqual(rule.Spec.Groups, file.Groups) {
		t.Errorf("PrometheusRule groups differ from files/prometheus-rules.yaml: %s", cmp.Diff(file.Groups, rule.Spec.Groups))
	}
}

// checkDashboard checks that the dashboard ConfigMap carries files/grafana-dashboard.json for
// Grafana's sidecar.
func checkDashboard(t *testing.T, objs objects) {
	t.Helper()
	var cm corev1.ConfigMap
	objs.get(t, "ConfigMap", "fedbr-manager-dashboard", &cm)
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "charts", "fedbr-manager", "files", "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(cm.Data["fedbr.json"]) != strings.TrimSpace(string(data)) || cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap labels %v, data differs from files/grafana-dashboard.json: %v", cm.Labels, cm.Data["fedbr.json"] != string(data))
	}
}

// Every fedbr metric an alert rule or a dashboard panel queries is one the manager exports (a
// renamed metric would leave an alert that never fires), and every metric the manager exports is
// on the dashboard.
func TestRulesAndDashboardQueryExportedMetrics(t *testing.T) {
	exported := map[string]bool{}
	for _, c := range metrics.All() {
		ch := make(chan *prometheus.Desc, 8)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("no fqName in %s", d)
			}
			exported[m[1]] = true
		}
	}
	if len(exported) < 10 {
		t.Fatalf("only %d metrics exported: %v", len(exported), exported)
	}
	files := filepath.Join(testenv.RepoRoot(), "charts", "fedbr-manager", "files")
	onDashboard := map[string]bool{}
	for _, f := range []string{"prometheus-rules.yaml", "grafana-dashboard.json"} {
		data, err := os.ReadFile(filepath.Join(files, f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "grafana-dashboard.json" && !json.Valid(data) {
			t.Fatalf("%s is not JSON", f)
		}
		queried := metricName.FindAllString(string(data), -1)
		if len(queried) == 0 {
			t.Fatalf("%s queries no fedbr metric", f)
		}
		for _, q := range queried {
			base := q
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(q, suffix); ok && exported[b] {
					base = b
				}
			}
			if !exported[base] {
				t.Errorf("%s queries %s, which the manager does not export", f, q)
			}
			if f == "grafana-dashboard.json" {
				onDashboard[base] = true
			}
		}
	}
	for m := range exported {
		if !onDashboard[m] && !offDashboard[m] {
			t.Errorf("metric %s is not on the dashboard", m)
		}
	}
}

var (
	fqName     = regexp.MustCompile(`fqName: "([^"]+)"`)
	metricName = regexp.MustCompile(`\bfedbr_[a-z0-9_]+`)
	// offDashboard are metrics whose series carry a backup's name: a table of completed backups'
	// sizes belongs in describe, not in a time series panel.
	offDashboard = map[string]bool{"fedbr_volumebackup_size_bytes": true, "fedbr_volumebackup_incremental_size_bytes": true}
)

func TestAgentChart(t *testing.T) {
	const roleArn, stepRoleArn = "arn:aws:iam::111122223333:role/fedbr-agent", "arn:aws:iam::111122223333:role/fedbr-br"
	for _, tt := range []chartCase{{
		name:   "defaults",
		values: map[string]any{"clusterName": "dp1"},
		args: []string{"agent", "--k8s-cluster-name=dp1", "--image=" + defaultImage(t, agent), "--job-ttl=24h", "--step-exit-delay=0s", "--metrics-bind-address=:8080", "--metrics-secure=true",
			"--health-probe-bind-address=:8081", "--leader-elect=true", "--leader-election-namespace=fedbr-system", "--max-concurrent-reconciles=4",
			"--orphan-sweep-interval=10m", "--orphan-grace=1h", "--pod-annotations=iam.amazonaws.com/role,eks.amazonaws.com/role-arn", "--v=0"},
		check: func(t *testing.T, objs objects, d *appsv1.Deployment) {
			checkDefaultPod(t, agent, d)
			checkMonitoring(t, objs, "fedbr-agent", 8080, false)
			if sa := objs.get(t, "ServiceAccount", "fedbr-agent", nil); len(sa.GetAnnotations()) != 0 {
				t.Errorf("agent service account annotations %v by default", sa.GetAnnotations())
			}
			if n := len(objs.all("Secret")); n != 0 {
				t.Errorf("%d Secrets rendered, want none by default", n)
			}
			if n := len(stepBindings(objs)); n != 0 {
				t.Errorf("%d RoleBindings besides the leader election's rendered, want none by default", n)
			}
			checkAgentBindings(t, objs)
			if n := len(objs.all("ServiceAccount")); n != 1 {
				t.Errorf("%d service accounts by default, want the agent's", n)
			}
			if *d.Spec.Replicas != 1 {
				t.Errorf("%d replicas by default, want 1", *d.Spec.Replicas)
			}
			checkPreflightPods(t, objs, nil)
		},
	}, {
		name: "everything on",
		values: dressed(map[string]any{
			"clusterName":             "dp-us-west-2a",
			"stepImage":               "registry.example.com/fedbr-br:v9.9.9",
			"leaderElection":          map[string]any{"namespace": "leases"},
			"aws":                     map[string]any{"region": "us-west-2", "endpoint": "https://ec2.us-west-2.amazonaws.com"},
			"watchNamespaces":         []any{"tidb", "tidb-restore"},
			"jobTTL":                  "2h",
			"stepExitDelay":           "5s",
			"saveStepLogs":            true,
			"maxConcurrentReconciles": 8,
			"orphanSweep":             map[string]any{"interval": "30m", "grace": "2h"},
			"policy": map[string]any{"sameNamespace": false, "namespaces": []any{"ops=tidb-*", "ci=tidb-ci"},
				"images": []any{"registry.example.com/fedbr:*", "registry.example.com/warm:*"}, "hostPath": true,
				"serviceAccounts": []any{"tidb/br-*"}, "privilegedWarmup": true, "upstreamBackups": true, "env": []any{"HTTPS_PROXY", "AWS_CA_BUNDLE"},
				"volumeTypes": []any{"csi", "projected"}, "storage": []any{"s3://backups-*/tenants/{namespace}", "s3://shared"}, "podAnnotations": []any{"iam.amazonaws.com/role", "sidecar.istio.io/*"},
				"podLabels": []any{"team", "app.kubernetes.io/*"}},
			"verbosity":          1,
			"apiServer":          map[string]any{"kubeconfig": "/etc/fedbr/config/kubeconfig", "context": "dp"},
			"extraArgs":          []any{"--job-ttl=3h"},
			"serviceAccount":     map[string]any{"roleArn": roleArn, "annotations": map[string]any{"example.com/a": "b"}},
			"stepServiceAccount": map[string]any{"namespaces": []any{"tidb", "tidb-restore"}, "roleArn": stepRoleArn},
			"preflight":          map[string]any{"storage": "s3://backups-prod/{namespace}", "tidbClusters": []any{"tidb/basic", "tidb-restore/basic"}},
			"managerAccess": map[string]any{"serviceAccount": map[string]any{"create": true},
				"subjects": []any{map[string]any{"kind": "User", "name": "fedbr-manager", "apiGroup": "rbac.authorization.k8s.io"}}},
		}),
		args: []string{"agent", "--k8s-cluster-name=dp-us-west-2a", "--image=registry.example.com/fedbr-br:v9.9.9", "--kubeconfig=/etc/fedbr/config/kubeconfig",
			"--context=dp", "--region=us-west-2", "--aws-endpoint=https://ec2.us-west-2.amazonaws.com", "--namespace=tidb,tidb-restore", "--job-ttl=2h", "--step-exit-delay=5s", "--save-step-logs=true",
			"--metrics-bind-address=:9090", "--metrics-secure=true", "--metrics-cert-dir=/etc/fedbr/metrics-certs", "--health-probe-bind-address=:9091", "--leader-elect=true", "--leader-election-namespace=leases",
			"--max-concurrent-reconciles=8", "--orphan-sweep-interval=30m", "--orphan-grace=2h",
			"--allow-same-namespace=false", "--allow-namespaces=ops=tidb-*", "--allow-namespaces=ci=tidb-ci",
			"--allowed-images=registry.example.com/fedbr:*,registry.example.com/warm:*", "--allow-host-path=true",
			"--allowed-service-accounts=tidb/br-*", "--allow-privileged-warmup=true", "--allow-upstream-backups=true", "--allowed-env=HTTPS_PROXY,AWS_CA_BUNDLE",
			"--allowed-volume-types=csi,projected", "--allowed-storage=s3://backups-*/tenants/{namespace},s3://shared", "--pod-annotations=iam.amazonaws.com/role,sidecar.istio.io/*",
			"--pod-labels=team,app.kubernetes.io/*", "--v=1", "--job-ttl=3h"},
		check: func(t *testing.T, objs objects, d *appsv1.Deployment) {
			checkDressed(t, d)
			checkMonitoring(t, objs, "fedbr-agent", 8080, true)
			// --dry-run stops a Deployment's agent right after it started: not a value.
			checkEveryFlag(t, agentcmd.NewCmd(), d.Spec.Template.Spec.Containers[0].Args, "dry-run")
			if a := objs.get(t, "ServiceAccount", "fedbr-agent", nil).GetAnnotations(); a["eks.amazonaws.com/role-arn"] != roleArn || a["example.com/a"] != "b" {
				t.Errorf("agent service account annotations %v", a)
			}
			checkStepServiceAccounts(t, objs, stepRoleArn, "tidb", "tidb-restore")
			checkPreflightPods(t, objs, []string{"br", "preflight", "--region=us-west-2", "--aws-endpoint=https://ec2.us-west-2.amazonaws.com",
				"--storage=s3://backups-prod/{namespace}"}, "tidb", "tidb-restore")
			checkTidbClusterPreflight(t, objs, "fedbr-agent", "--tidbcluster=tidb/basic", "--tidbcluster=tidb-restore/basic")
			checkAgentBindings(t, objs, "tidb", "tidb-restore")
			checkManagerAgentLease(t, objs, "leases", "fedbr-agent-dp-us-west-2a", "fedbr-manager-remote", "fedbr-manager")
			// With watchNamespaces the manager's rights are there only, for both subjects.
			if bound(t, objs, "fedbr-manager-dataplane", "fedbr-manager-remote", "fedbr-system") {
				t.Error("the manager's service account is bound to fedbr-manager-dataplane cluster-wide despite watchNamespaces")
			}
			got := map[string]int{}
			for _, obj := range objs.all("RoleBinding") {
				var b rbacv1.RoleBinding
				if as(t, obj, &b); b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "fedbr-manager-dataplane" {
					if len(b.Subjects) != 2 || b.Subjects[0].Name != "fedbr-manager-remote" || b.Subjects[1].Name != "fedbr-manager" {
						t.Errorf("RoleBinding %s/%s subjects %+v, want the service account and the user", b.Namespace, b.Name, b.Subjects)
					}
					got[b.Namespace]++
				}
			}
			if want := map[string]int{"tidb": 1, "tidb-restore": 1}; !maps.Equal(got, want) {
				t.Errorf("fedbr-manager-dataplane RoleBindings by namespace %v, want %v", got, want)
			}
			// The manager's tokens are minted bound and expiring (docs/install.md): the chart
			// makes no token Secret, whose token would never expire.
			for _, o := range objs.all("Secret") {
				if typ, _, _ := unstructured.NestedString(o.Object, "type"); typ == string(corev1.SecretTypeServiceAccountToken) {
					t.Errorf("the chart makes Secret %s of type %s: a token that never expires", o.GetName(), typ)
				}
			}
		},
	}} {
		t.Run(tt.name, func(t *testing.T) {
			agent.lint(t, tt.values)
			objs := agent.template(t, tt.values)
			d := checkInstall(t, agent, objs, install{crds: "config/crd/bases/dataplane.fedbr.io_*.yaml",
				roles: []string{"config/rbac/agent_role.yaml", "config/rbac/manager_dataplane_role.yaml", "config/rbac/dataplane_viewer_role.yaml"}, role: "fedbr-agent",
				deployment: "fedbr-agent", args: tt.args})
			checkAgentEnv(t, d)
			// The real command takes the arguments: --dry-run validates them and exits. The
			// pod's environment has AWS_REGION, as EKS injects it with IRSA and Pod Identity
			// (the chart's aws.region, when set, is --region and wins).
			t.Setenv("AWS_REGION", "us-east-1")
			cmd := agentcmd.NewCmd()
			var out bytes.Buffer
			cmd.SetArgs(append(slices.Clone(tt.args[1:]), "--dry-run"))
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			if err := cmd.Execute(); err != nil || !strings.Contains(out.String(), "would run the agent") {
				t.Errorf("fedbr agent refuses the chart's arguments: %v\n%s", err, out.String())
			}
			tt.check(t, objs, d)
		})
	}

	t.Run("without a cluster name", func(t *testing.T) {
		out, err := agent.run(t, nil, "template", agent.release, agent.name)
		if err == nil || !strings.Contains(out, "clusterName is required") {
			t.Errorf("rendered (%v):\n%s", err, out)
		}
	})
}

// checkAgentEnv checks that the agent finds its own Pod (the orphan sweeper's Events).
func checkAgentEnv(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	paths := map[string]string{}
	for _, e := range d.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			paths[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if paths["POD_NAMESPACE"] != "metadata.namespace" || paths["POD_NAME"] != "metadata.name" {
		t.Errorf("agent env from the downward API: %v", paths)
	}
}

// checkStepServiceAccounts checks the steps' service account in each of namespaces: the
// name the agent gives step Jobs, IRSA's annotation, bound to ClusterRole fedbr-br-step.
// checkPreflightPods: the helm test is a pod fedbr-preflight in each step namespace, as the
// steps' service account, restricted, running args, which the real command accepts.
func checkPreflightPods(t *testing.T, objs objects, args []string, namespaces ...string) {
	t.Helper()
	var got []string
	for _, obj := range objs.all("Pod") {
		var p corev1.Pod
		if as(t, obj, &p); p.Name == tidbClusterPreflight {
			continue
		}
		got = append(got, p.Namespace)
		if p.Name != "fedbr-preflight" || p.Annotations["helm.sh/hook"] != "test" || p.Spec.ServiceAccountName != job.ServiceAccountName ||
			p.Spec.RestartPolicy != corev1.RestartPolicyNever || len(p.Spec.Containers) != 1 {
			t.Errorf("preflight pod %s/%s: %+v %+v", p.Namespace, p.Name, p.Annotations, p.Spec)
			continue
		}
		c := p.Spec.Containers[0]
		want := make([]string, len(args))
		for i, a := range args {
			want[i] = strings.ReplaceAll(a, "{namespace}", p.Namespace)
		}
		if !slices.Equal(c.Args, want) {
			t.Errorf("preflight pod in %s: args %q, want %q", p.Namespace, c.Args, want)
		}
		if err := podsecurity.Check(podsecurity.Restricted, &p.ObjectMeta, &p.Spec); err != nil {
			t.Errorf("preflight pod in %s: %v", p.Namespace, err)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("preflight pod in %s: root file system not read-only", p.Namespace)
		}
		cmd := brpreflight.NewCmd()
		if err := cmd.ParseFlags(c.Args[2:]); err != nil {
			t.Errorf("fedbr br preflight refuses the hook's args %q: %v", c.Args, err)
		}
	}
	if slices.Sort(got); !slices.Equal(got, namespaces) {
		t.Errorf("preflight pods in %v, want %v", got, namespaces)
	}
}

// tidbClusterPreflight is the helm test pod that checks preflight.tidbClusters.
const tidbClusterPreflight = "fedbr-preflight-tidbclusters"

// checkTidbClusterPreflight: with preflight.tidbClusters, one more helm test pod in the release
// namespace, as the agent's service account (which may read TidbClusters), restricted, checking
// them without the AWS checks, in args the real command accepts.
func checkTidbClusterPreflight(t *testing.T, objs objects, agentSA string, tidbClusters ...string) {
	t.Helper()
	var p corev1.Pod
	as(t, objs.get(t, "Pod", tidbClusterPreflight, nil), &p)
	if p.Annotations["helm.sh/hook"] != "test" || p.Spec.ServiceAccountName != agentSA || p.Spec.RestartPolicy != corev1.RestartPolicyNever || len(p.Spec.Containers) != 1 {
		t.Fatalf("pod %s: %+v %+v", p.Name, p.Annotations, p.Spec)
	}
	if want := append([]string{"br", "preflight", "--aws=false"}, tidbClusters...); !slices.Equal(p.Spec.Containers[0].Args, want) {
		t.Errorf("pod %s: args %q, want %q", p.Name, p.Spec.Containers[0].Args, want)
	}
	if err := podsecurity.Check(podsecurity.Restricted, &p.ObjectMeta, &p.Spec); err != nil {
		t.Errorf("pod %s: %v", p.Name, err)
	}
	if err := brpreflight.NewCmd().ParseFlags(p.Spec.Containers[0].Args[2:]); err != nil {
		t.Errorf("fedbr br preflight refuses the hook's args %q: %v", p.Spec.Containers[0].Args, err)
	}
}

func checkStepServiceAccounts(t *testing.T, objs objects, roleArn string, namespaces ...string) {
	t.Helper()
	var got []string
	for _, obj := range objs.all("ServiceAccount") {
		if obj.GetName() != job.ServiceAccountName {
			continue
		}
		got = append(got, obj.GetNamespace())
		if a := obj.GetAnnotations()["eks.amazonaws.com/role-arn"]; a != roleArn {
			t.Errorf("service account %s/%s: role-arn %q, want %q", obj.GetNamespace(), obj.GetName(), a, roleArn)
		}
	}
	if slices.Sort(got); !slices.Equal(got, namespaces) {
		t.Errorf("steps' service accounts in %v, want %v", got, namespaces)
	}
	bindings := stepBindings(objs)
	for _, obj := range bindings {
		var b rbacv1.RoleBinding
		as(t, obj, &b)
		if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != "fedbr-br-step" || len(b.Subjects) != 1 || b.Subjects[0].Name != job.ServiceAccountName ||
			b.Subjects[0].Namespace != b.Namespace || !slices.Contains(namespaces, b.Namespace) {
			t.Errorf("RoleBinding %s/%s: %+v %+v", b.Namespace, b.Name, b.RoleRef, b.Subjects)
		}
	}
	if n := len(bindings); n != len(namespaces) {
		t.Errorf("%d RoleBindings, want one per namespace %v", n, namespaces)
	}
}

// stepBindings are the RoleBindings but the leader election's (checkLeases), the agent's own
// (checkAgentBindings) and the manager's (its data-plane role, and the agent's Lease:
// checkManagerAgentLease).
func stepBindings(objs objects) objects {
	var out objects
	for _, obj := range objs.all("RoleBinding") {
		kind, _, _ := unstructured.NestedString(obj.Object, "roleRef", "kind")
		ref, _, _ := unstructured.NestedString(obj.Object, "roleRef", "name")
		if !strings.HasSuffix(obj.GetName(), "-leader-election") && obj.GetName() != "fedbr-manager-agent-lease" &&
			(kind != "ClusterRole" || !strings.HasPrefix(ref, "fedbr-agent") && ref != "fedbr-manager-dataplane") {
			out = append(out, obj)
		}
	}
	return out
}

// checkManagerAgentLease: the manager may get the agent's leader-election Lease, that one
// only, in its namespace, and nothing else there (agentlease).
func checkManagerAgentLease(t *testing.T, objs objects, ns, lease string, subjects ...string) {
	t.Helper()
	var r rbacv1.Role
	var b rbacv1.RoleBinding
	objs.get(t, "Role", "fedbr-manager-agent-lease", &r)
	objs.get(t, "RoleBinding", "fedbr-manager-agent-lease", &b)
	want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{lease}, Verbs: []string{"get"}}}
	if r.Namespace != ns || !equality.Semantic.DeepEqual(r.Rules, want) {
		t.Errorf("Role %s/%s rules %+v, want %+v in %s", r.Namespace, r.Name, r.Rules, want, ns)
	}
	var names []string
	for _, s := range b.Subjects {
		names = append(names, s.Name)
	}
	if b.Namespace != ns || b.RoleRef.Kind != "Role" || b.RoleRef.Name != r.Name || !slices.Equal(names, subjects) {
		t.Errorf("RoleBinding %s/%s: %+v to %v, want Role %s to %v in %s", b.Namespace, b.Name, b.RoleRef, names, r.Name, subjects, ns)
	}
}

// clusterScoped are the resources of ClusterRole fedbr-agent, the agent's rights bound
// cluster-wide whatever watchNamespaces says.
var clusterScoped = map[string]bool{"persistentvolumes": true, "nodes": true, "namespaces": true, "tokenreviews": true, "subjectaccessreviews": true}

// checkAgentBindings: ClusterRole fedbr-agent grants only what is cluster-scoped; with
// watchNamespaces the namespaced rules (fedbr-agent-namespaced) are RoleBindings in exactly
// those namespaces and fedbr-agent-self one in the release namespace, and nothing binds the
// namespaced rules cluster-wide; without, one ClusterRoleBinding does.
func checkAgentBindings(t *testing.T, objs objects, watch ...string) {
	t.Helper()
	var role rbacv1.ClusterRole
	objs.get(t, "ClusterRole", "fedbr-agent", &role)
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			if !clusterScoped[res] {
				t.Errorf("ClusterRole fedbr-agent grants %v on %s cluster-wide; namespaced rules belong in fedbr-agent-namespaced", r.Verbs, res)
			}
		}
	}
	if want := len(watch) == 0; bound(t, objs, "fedbr-agent-namespaced", "fedbr-agent", agent.namespace) != want {
		t.Errorf("fedbr-agent-namespaced bound cluster-wide: %v, want %v (watchNamespaces %v)", !want, want, watch)
	}
	got := map[string]string{}
	for _, obj := range objs.all("RoleBinding") {
		var b rbacv1.RoleBinding
		if as(t, obj, &b); b.RoleRef.Kind != "ClusterRole" || !strings.HasPrefix(b.RoleRef.Name, "fedbr-agent") {
			continue // the leader election's Role (checkLeases), the steps' (checkStepServiceAccounts)
		}
		if len(b.Subjects) != 1 || b.Subjects[0].Name != "fedbr-agent" || b.Subjects[0].Namespace != agent.namespace {
			t.Errorf("RoleBinding %s/%s: %+v %+v", b.Namespace, b.Name, b.RoleRef, b.Subjects)
		}
		got[b.Namespace+"/"+b.RoleRef.Name] = b.Name
	}
	want := map[string]string{}
	for _, ns := range watch {
		want[ns+"/fedbr-agent-namespaced"] = "fedbr-agent"
	}
	if len(watch) > 0 {
		want[agent.namespace+"/fedbr-agent-self"] = "fedbr-agent-self"
	}
	if !maps.Equal(got, want) {
		t.Errorf("the agent's RoleBindings (namespace/role: name) %v, want %v", got, want)
	}
}

// TestConfigManagerIsRestricted: the manager's plain manifest (config/manager, for installs
// without Helm) meets Pod Security "restricted" too.
func TestConfigManagerIsRestricted(t *testing.T) {
	var d appsv1.Deployment
	readObjects(t, "config/manager/manager.yaml").get(t, "Deployment", "fedbr-manager", &d)
	if err := podsecurity.Check(podsecurity.Restricted, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec); err != nil {
		t.Error(err)
	}
}
