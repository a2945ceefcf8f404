package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/testenv"
)

// testInstall is the playground's Done-when, in TestLab's lab once the lab's own checks are
// done: fedbr installed through its Helm charts (env.Install: the real helm, namespace
// fedbr-system under the restricted Pod Security Standard) backs up a TiDB cluster spread over
// three data planes and restores it into fresh clusters in another namespace, then lets the
// schedule sample take its first backup, driven only by `kubectl apply -f` of config/samples'
// YAML (adapted to the lab) and watched with kubectl and `fedbr describe`. The API server
// refuses, in fedbr-system, a pod the restricted policy forbids: the charts' pods were admitted
// by the enforcing policy.
func testInstall(t *testing.T, ctx context.Context, l *env.Lab, binDir string) {
	helm, err := env.DefaultHelm(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(helm); err != nil {
		if os.Getenv("FEDBR_HELM") != "" {
			t.Fatalf("FEDBR_HELM=%s: %v", helm, err)
		}
		t.Skipf("no helm at %s: run `make helm`, or set FEDBR_HELM", helm)
	}
	k := kubectl{t: t, bin: filepath.Join(binDir, "kubectl"), kubeconfig: l.Kubeconfig}
	t.Cleanup(func() {
		if t.Failed() {
			for _, c := range l.Contexts {
				name := env.AgentRelease
				if c == l.Control {
					name = env.ManagerRelease
				}
				out, _ := k.run(context.Background(), c, nil, "logs", "-n", env.InstallNamespace, "deploy/"+name, "--tail", "40")
				t.Logf("---- %s: %s (tail) ----\n%s", c, name, out)
			}
		}
	})

	installed := time.Now()
	// The playground's restore lives with its backup in the control plane's tidb, whose prefix
	// it reads (the agents' default storage policy), and restores into tidb-restored.
	if err := env.Install(ctx, l, env.InstallOptions{Helm: helm, Log: t.Logf, AllowNamespaces: []string{"tidb=tidb-restored"},
		// The agents' namespaced rights as RoleBindings in the two namespaces the journey uses
		// only (the agent chart's watchNamespaces), as an operator who lists them installs it.
		WatchNamespaces: []string{"tidb", "tidb-restored"},
		// The steps there authenticate with IRSA, as on EKS; the policy lets issue 38's attack
		// through to them (testAWSConfigRedirection).
		StepRoleNamespaces: []string{"tidb", "tidb-restored"}, Policy: redirectionPolicy,
		// The agent chart's helm test checks the playground's bucket (testPreflightHook).
		PreflightStorage: "s3://fedbr-demo/preflight",
		// And, as the agent, the playground's TidbCluster (found; its TiKV release judged).
		PreflightTidbClusters: []string{"tidb/basic"},
		// The steps save their logs beside the backup's metadata (checked in BackupRestore).
		SaveStepLogs: true}); err != nil {
		t.Fatal(err)
	}
	t.Logf("install took %s", time.Since(installed).Round(time.Millisecond))

	t.Run("RestrictedEnforced", func(t *testing.T) { testRestrictedEnforced(t, ctx, k.with(t), l) })
	if t.Failed() {
		return
	}
	t.Run("BackupRestore", func(t *testing.T) { testPlaygroundBackupRestore(t, ctx, k.with(t), l) })
	if t.Failed() {
		return
	}
	t.Run("PreflightHook", func(t *testing.T) { testPreflightHook(t, ctx, k.with(t), helm, l) })
	t.Run("AWSConfigRedirection", func(t *testing.T) { testAWSConfigRedirection(t, ctx, k.with(t), l, "tidb", "fedbr-demo") })
}

// testPreflightHook: `helm test` of the agent chart in every data plane runs fedbr br preflight
// as the steps' service account in each step namespace: region, the IRSA web identity exchange
// at the double's STS, EC2's reads and the playground's bucket (created by BackupRestore) pass.
func testPreflightHook(t *testing.T, ctx context.Context, k kubectl, helm string, l *env.Lab) {
	for _, d := range l.DataPlanes {
		hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		out, err := exec.CommandContext(hctx, helm, "test", env.AgentRelease, "--namespace", env.InstallNamespace,
			"--kubeconfig", l.Kubeconfig, "--kube-context", d.Cluster, "--timeout", "90s").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%s: helm test: %v\n%s", d.Cluster, err, out)
		}
		// One pod per step namespace and the TidbCluster check's, each succeeded.
		if n := strings.Count(string(out), "Phase:          Succeeded"); n != 3 {
			t.Errorf("%s: %d preflight pods succeeded, want one in each of tidb and tidb-restored and the TidbCluster check:\n%s", d.Cluster, n, out)
		}
		logs := k.must(ctx, d.Cluster, nil, "logs", "-n", env.InstallNamespace, "fedbr-preflight-tidbclusters")
		if !strings.Contains(logs, "ok    tidbcluster tidb/basic found, ") || !strings.Contains(logs, "TiKV; TiKV "+env.LabTiDBVersion+" serves the snapshot lease") {
			t.Errorf("%s: the TidbCluster check's log:\n%s", d.Cluster, logs)
		}
		for _, ns := range []string{"tidb", "tidb-restored"} {
			logs := k.must(ctx, d.Cluster, nil, "logs", "-n", ns, "fedbr-preflight")
			for _, want := range []string{"ok    region    " + l.AWS.Region, "ok    identity  WebIdentityCredentials (key ASIA…)", "ok    ec2 ",
				"ok    storage   s3://fedbr-demo/preflight: .fedbr-preflight/"} {
				if !strings.Contains(logs, want) {
					t.Errorf("%s/%s: the preflight pod's log lacks %q:\n%s", d.Cluster, ns, want, logs)
				}
			}
		}
	}
}

// testRestrictedEnforced: a pod with no security context (root allowed, privilege escalation,
// no seccomp profile) is refused in fedbr-system by Pod Security Admission.
func testRestrictedEnforced(t *testing.T, ctx context.Context, k kubectl, l *env.Lab) {
	pod := `apiVersion: v1
kind: Pod
metadata:
  name: not-restricted
  namespace: ` + env.InstallNamespace + `
spec:
  containers:
    - name: c
      image: ghcr.io/fedbr/fedbr:v0.1.0
      args: [version]
`
	for _, c := range []string{l.Control, l.DataPlanes[0].Cluster} {
		out, err := k.run(ctx, c, []byte(pod), "apply", "-f", "-")
		if err == nil {
			t.Fatalf("%s: a pod violating the restricted policy was admitted in %s: %s", c, env.InstallNamespace, out)
		}
		if !strings.Contains(out, `violates PodSecurity "restricted`) {
			t.Fatalf("%s: refused, but not by Pod Security Admission: %v: %s", c, err, out)
		}
	}
}

// testPlaygroundBackupRestore drives the playground as docs/lab.md walks through it:
// `fedbr-lab lab tidb --bank` (a TiDB cluster over the three data planes, the bank writing), a
// VolumeBackup and, after `lab tidb --recovery`, a VolumeRestore with kubectl apply of the
// samples, then `lab bank check` of the restored cluster at the backup's commit ts.
func testPlaygroundBackupRestore(t *testing.T, ctx context.Context, k kubectl, l *env.Lab) {
	const (
		source, restored = "tidb", "tidb-restored"
		bucket           = "fedbr-demo"
		name             = "nightly-2026-11-29"
		accounts         = "200"
	)
	started := time.Now()
	labCmd(t, ctx, "lab", "tidb", "--dir", l.Dir, "--namespace", source, "--bank", "--accounts", accounts, "--bucket", bucket)
	t.Logf("lab tidb --bank took %s", time.Since(started).Round(time.Millisecond))
	l, err := env.Load(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Banks) != 1 || !l.Banks[0].Process.Running() {
		t.Fatalf("lab tidb --bank: banks %+v, want one running", l.Banks)
	}
	t.Logf("TiDB cluster %s/basic up: 3 TiKV over %d data planes, the bank writing", source, len(l.DataPlanes))

	clusters := func(s string) string {
		for i, d := range l.DataPlanes {
			s = strings.ReplaceAll(s, "eks-use1-az"+strconv.Itoa(i+1), d.Cluster)
		}
		return s
	}
	backup := adapt(t, "federation_v1alpha1_volumebackup.yaml", clusters,
		subst{"namespace: default", "namespace: " + source},
		subst{"prefix: default/", "prefix: " + source + "/"},
		subst{"region: us-east-1", "region: " + l.AWS.Region},
		subst{"acme-tidb-backups", bucket},
		// The lab's nodes give every pod the lab's AWS credentials.
		subst{"      secretName: s3-credentials\n", ""})
	started = time.Now()
	k.must(ctx, l.Control, backup, "apply", "-f", "-")
	k.waitComplete(ctx, l.Control, source, "volumebackup", name, 5*time.Minute)
	t.Logf("VolumeBackup %s/%s Complete after %s", source, name, time.Since(started).Round(time.Millisecond))
	// What an SRE reads: one view across the data planes, the manager's data-plane kubeconfig
	// read from the chart's Secret.
	view := labCmd(t, ctx, "describe", "backup", name, "-n", source, "--kubeconfig", l.Kubeconfig, "--context", l.Control)
	for _, want := range []string{name, "Complete", l.DataPlanes[0].Cluster, l.DataPlanes[1].Cluster, l.DataPlanes[2].Cluster} {
		if !strings.Contains(view, want) {
			t.Fatalf("fedbr describe backup %s does not show %q:\n%s", name, want, view)
		}
	}

	// The install as `fedbr preflight` sees it: the manager's data-plane kubeconfig from the
	// chart's Secret, each plane's member CRDs and the manager's rights there.
	pre := labCmd(t, ctx, "preflight", "--kubeconfig", l.Kubeconfig, "--context", l.Control, "--dataplane-namespaces", source+","+restored)
	passed := 0
	for _, line := range strings.Split(pre, "\n") {
		if strings.HasPrefix(line, "ok  ") {
			passed++
		}
	}
	// Per plane five checks (the last: its agent holds its Lease, which the manager's identity
	// may read), and one more for a context with a bound token (every plane but the EKS-auth
	// one, whose manager signs EKS tokens): it has 30 days left.
	want := 2 + 5*len(l.DataPlanes)
	for _, d := range l.DataPlanes {
		if l.EKSAuth == nil || l.EKSAuth.Cluster != d.Cluster {
			want++
		}
	}
	if n := passed; n != want {
		t.Fatalf("fedbr preflight passed %d checks, want %d:\n%s", n, want, pre)
	}
	for _, d := range l.DataPlanes {
		if w := "an agent runs (Lease fedbr-system/fedbr-agent-" + d.Cluster + "), held by "; !strings.Contains(pre, w) {
			t.Errorf("fedbr preflight does not say %q:\n%s", w, pre)
		}
	}

	labCmd(t, ctx, "lab", "tidb", "--dir", l.Dir, "--namespace", restored, "--recovery", "--bucket", "")
	// The restore is the backup's namespace's: it reads that namespace's prefix and acts on
	// the data planes' restored namespace (env.Install's AllowNamespaces above).
	restore := adapt(t, "federation_v1alpha1_volumerestore.yaml", clusters,
		subst{"namespace: default", "namespace: " + source},
		subst{"prefix: default/", "prefix: " + source + "/"},
		subst{"tcNamespace: tidb\n", "tcNamespace: " + restored + "\n"},
		subst{"region: us-east-1", "region: " + l.AWS.Region},
		subst{"acme-tidb-backups", bucket},
		// Each data plane's nodes are in one zone: the volumes stay in it.
		subst{"crossAZ: true", "crossAZ: false"},
		subst{regexp.MustCompile(`(?m)^ *azName: .*\n`), ""})
	started = time.Now()
	k.must(ctx, l.Control, restore, "apply", "-f", "-")
	k.waitComplete(ctx, l.Control, source, "volumerestore", "restore-"+name, 6*time.Minute)
	t.Logf("VolumeRestore %s/restore-%s Complete after %s", source, name, time.Since(started).Round(time.Millisecond))
	k.waitStores(ctx, l, restored)
	prefixes := checkStepLogs(t, ctx, k, l, source, name)
	// An SRE reads them back with `fedbr logs --saved`, with their own AWS credentials.
	saved := labCmd(t, ctx, "logs", "restore", "restore-"+name, "-n", source, "--saved", "--step", "restore-volumes",
		"--kubeconfig", l.Kubeconfig, "--context", l.Control, "--aws-endpoint", l.AWS.Endpoint, "--region", l.AWS.Region)
	if strings.Count(saved, "(saved in s3://") < len(l.DataPlanes) || strings.Count(saved, "fedbr br restore-volumes started") < len(l.DataPlanes) {
		t.Errorf("fedbr logs restore restore-%s --saved --step restore-volumes: want one saved log per plane:\n%s", name, saved)
	}

	// The restored cluster holds exactly the bank's state at the backup's commit ts.
	ts := k.must(ctx, l.Control, nil, "get", "-n", source, "volumebackup", name, "-o", "jsonpath={.status.commitTs}")
	block, err := env.RestoreBlock(l.DataPlanes[0])
	if err != nil {
		t.Fatal(err)
	}
	out := labCmd(t, ctx, "lab", "bank", "check", "--pd", block+".10:2379", "--accounts", accounts, "--log", l.Banks[0].Log, "--ts", ts)
	t.Logf("lab bank check: %s", strings.TrimSpace(out))
	// And as a drill judges it from PD: every check of fedbr br verify passes, with the
	// backup's store count and commit ts.
	out = labCmd(t, ctx, "br", "verify", "--pd", block+".10:2379", "--stores", strconv.Itoa(len(l.DataPlanes)), "--commit-ts", ts, "--wait", "2m")
	if !strings.Contains(out, `"passed": true`) || strings.Count(out, "ok    ") != 4 {
		t.Errorf("fedbr br verify of the restored cluster:\n%s", out)
	}

	// The schedule sample, ticking every minute instead of every six hours: its first backup
	// completes, and `fedbr describe schedule` shows it.
	const schedule = "every-6h"
	sched := adapt(t, "federation_v1alpha1_volumebackupschedule.yaml", clusters,
		subst{"namespace: default", "namespace: " + source},
		subst{"prefix: default/", "prefix: " + source + "/"},
		subst{`schedule: "0 */6 * * *"`, `schedule: "* * * * *"`},
		subst{"region: us-east-1", "region: " + l.AWS.Region},
		subst{"acme-tidb-backups", bucket})
	started = time.Now()
	k.must(ctx, l.Control, sched, "apply", "-f", "-")
	first := k.waitField(ctx, l.Control, source, "volumebackupschedule", schedule, "{.status.lastBackup}", 3*time.Minute)
	k.waitComplete(ctx, l.Control, source, "volumebackup", first, 5*time.Minute)
	t.Logf("VolumeBackupSchedule %s/%s: its first backup %s Complete after %s", source, schedule, first, time.Since(started).Round(time.Millisecond))
	view = labCmd(t, ctx, "describe", "schedule", schedule, "-n", source, "--kubeconfig", l.Kubeconfig, "--context", l.Control)
	for _, want := range []string{schedule, first} {
		if !strings.Contains(view, want) {
			t.Fatalf("fedbr describe schedule %s does not show %q:\n%s", schedule, want, view)
		}
	}
	k.must(ctx, l.Control, nil, "delete", "volumebackupschedule", schedule, "-n", source)
	k.stepPodsRestricted(ctx, l, source, restored)

	// Deleted (cleanPolicy Delete), the backup's clean takes the saved logs with its metadata.
	k.must(ctx, l.Control, nil, "delete", "volumebackup", name, "-n", source, "--timeout", "3m")
	for _, p := range prefixes {
		if keys := s3Keys(t, ctx, l, p); len(keys) != 1 || keys[0] != "cleaned" {
			t.Errorf("after the clean %s holds %v, want only the tombstone", p, keys)
		}
	}
}

// checkStepLogs: with the agents' --save-step-logs every plane's backup prefix holds the
// snapshot step's log and the restore's steps' logs (restore-volumes in every plane,
// restore-data in one), each starting with its step's first line. It returns the prefixes.
func checkStepLogs(t *testing.T, ctx context.Context, k kubectl, l *env.Lab, ns, backup string) []string {
	t.Helper()
	paths := strings.Fields(k.must(ctx, l.Control, nil, "get", "-n", ns, "volumebackup", backup, "-o", "jsonpath={.status.backups[*].backupPath}"))
	if len(paths) != len(l.DataPlanes) {
		t.Fatalf("backup paths %v, want one per plane", paths)
	}
	// A step saves its log as it exits, after its report: the last ones may still be on their way.
	deadline := time.Now().Add(time.Minute)
	for {
		steps := map[string]int{}
		for _, p := range paths {
			for _, key := range s3Keys(t, ctx, l, p) {
				name, ok := strings.CutPrefix(key, meta.LogsPrefix)
				if !ok {
					continue
				}
				body := s3Get(t, ctx, l, p, key)
				for _, step := range []string{"snapshot", "size", "restore-volumes", "restore-data"} {
					if strings.Contains(name, "-"+step+"-") && strings.Contains(body, "fedbr br "+step+" started") {
						steps[step]++
					}
				}
			}
		}
		if steps["snapshot"] >= len(paths) && steps["restore-volumes"] >= len(paths) && steps["restore-data"] >= 1 {
			t.Logf("saved step logs by step: %v", steps)
			return paths
		}
		if time.Now().After(deadline) {
			t.Errorf("saved step logs by step %v, want a snapshot and a restore-volumes log in each of %d planes and a restore-data log", steps, len(paths))
			return paths
		}
		time.Sleep(time.Second)
	}
}

// s3Keys lists the objects under an s3:// prefix of the lab's AWS double.
func s3Keys(t *testing.T, ctx context.Context, l *env.Lab, prefix string) []string {
	t.Helper()
	keys, err := s3Store(t, ctx, l, prefix).List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

func s3Get(t *testing.T, ctx context.Context, l *env.Lab, prefix, key string) string {
	t.Helper()
	b, err := s3Store(t, ctx, l, prefix).Get(ctx, key, 4<<20)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func s3Store(t *testing.T, ctx context.Context, l *env.Lab, prefix string) blob.Store {
	t.Helper()
	loc, _, _ := strings.Cut(strings.TrimPrefix(prefix, "s3://"), "?") // ?region=…
	bucket, p, _ := strings.Cut(loc, "/")
	cfg := awsdouble.Config(l.AWS.Region)
	b, err := blob.NewS3(ctx, blob.S3Config{Region: l.AWS.Region, Bucket: bucket, Prefix: strings.TrimSuffix(p, "/") + "/", Endpoint: l.AWS.Endpoint, AWS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// labCmd runs the fedbr-lab binary, as a playground user does, and returns its output.
func labCmd(t *testing.T, ctx context.Context, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bins.fedbr, args...)
	// The lab's AWS credentials in the environment, as an SRE's shell has theirs: fedbr signs
	// the EKS-auth plane's token (the manager's kubeconfig names `aws eks get-token` for it) with
	// them, in-process.
	cmd.Env = append(os.Environ(), awsdouble.CredentialsEnv()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fedbr-lab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// stepPodsRestricted submits, as a server-side dry run in fedbr-system (where restricted is
// enforced), a copy of every step pod fedbr ran in namespaces (Job pods: the operator's own
// pods are bare): Pod Security Admission must admit each.
func (k kubectl) stepPodsRestricted(ctx context.Context, l *env.Lab, namespaces ...string) {
	k.t.Helper()
	steps := 0
	for _, d := range l.DataPlanes {
		for _, ns := range namespaces {
			var pods corev1.PodList
			out := k.must(ctx, d.Cluster, nil, "get", "pods", "-n", ns, "-l", batchv1.JobNameLabel, "-o", "json")
			if err := json.Unmarshal([]byte(out), &pods); err != nil {
				k.t.Fatal(err)
			}
			for _, p := range pods.Items {
				cp := corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
					ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: env.InstallNamespace}, Spec: p.Spec}
				cp.Spec.NodeName, cp.Spec.ServiceAccountName, cp.Spec.DeprecatedServiceAccount = "", "default", ""
				if out, err := k.run(ctx, d.Cluster, toYAML(k.t, cp), "create", "--dry-run=server", "-f", "-"); err != nil {
					k.t.Errorf("%s: step pod %s/%s (%s) is refused under restricted: %v: %s", d.Cluster, ns, p.Name,
						p.Labels[batchv1.JobNameLabel], err, out)
				}
				steps++
			}
		}
	}
	if steps == 0 {
		k.t.Fatalf("no step pod found in %v", namespaces)
	}
	k.t.Logf("%d step pods of the backup and the restore pass Pod Security restricted (server-side dry run in %s)", steps, env.InstallNamespace)
}

// subst replaces old (a string, which must occur, or a *regexp.Regexp) with new in a sample.
type subst struct {
	old any
	new string
}

// adapt reads config/samples/file and applies clusters and the substitutions; a substitution
// whose text the sample no longer has fails the test, so the samples cannot drift unnoticed.
func adapt(t *testing.T, file string, clusters func(string) string, subs ...subst) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", file))
	if err != nil {
		t.Fatal(err)
	}
	s := clusters(string(b))
	for _, sub := range subs {
		switch old := sub.old.(type) {
		case string:
			if !strings.Contains(s, old) {
				t.Fatalf("config/samples/%s has no %q any more", file, old)
			}
			s = strings.ReplaceAll(s, old, sub.new)
		case *regexp.Regexp:
			if !old.MatchString(s) {
				t.Fatalf("config/samples/%s has nothing matching %s any more", file, old)
			}
			s = old.ReplaceAllString(s, sub.new)
		}
	}
	return []byte(s)
}

func toYAML(t *testing.T, v any) []byte {
	t.Helper()
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// kubectl runs the real kubectl against one context of the lab's kubeconfig.
type kubectl struct {
	t          *testing.T
	bin        string
	kubeconfig string
}

// with is k for the (sub)test t: its failures end t.
func (k kubectl) with(t *testing.T) kubectl {
	k.t = t
	return k
}

func (k kubectl) run(ctx context.Context, context string, stdin []byte, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, k.bin, append([]string{"--kubeconfig", k.kubeconfig, "--context", context}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (k kubectl) must(ctx context.Context, context string, stdin []byte, args ...string) string {
	k.t.Helper()
	out, err := k.run(ctx, context, stdin, args...)
	if err != nil {
		k.t.Fatalf("kubectl --context %s %s: %v: %s", context, strings.Join(args, " "), err, out)
	}
	return out
}

// waitComplete watches kind/name's status.phase until Complete; Failed ends the test with the
// object's conditions.
func (k kubectl) waitComplete(ctx context.Context, context, ns, kind, name string, timeout time.Duration) {
	k.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for {
		phase := k.must(ctx, context, nil, "get", kind, name, "-n", ns, "-o", "jsonpath={.status.phase}")
		if phase != last {
			k.t.Logf("%s %s/%s: phase %q", kind, ns, name, phase)
			last = phase
		}
		switch phase {
		case "Complete":
			return
		case "Failed":
			k.t.Fatalf("%s %s/%s failed: %s", kind, ns, name,
				k.must(ctx, context, nil, "get", kind, name, "-n", ns, "-o", "jsonpath={.status.conditions}"))
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("%s %s/%s not Complete after %s: phase %q, conditions %s", kind, ns, name, timeout, phase,
				k.must(ctx, context, nil, "get", kind, name, "-n", ns, "-o", "jsonpath={.status.conditions}"))
		}
		select {
		case <-ctx.Done():
			k.t.Fatal(ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// waitField waits until the jsonpath field of kind ns/name is not empty, and returns it.
func (k kubectl) waitField(ctx context.Context, context, ns, kind, name, field string, timeout time.Duration) string {
	k.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if v := k.must(ctx, context, nil, "get", kind, name, "-n", ns, "-o", "jsonpath="+field); v != "" {
			return v
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("%s %s/%s: %s still empty after %s", kind, ns, name, field, timeout)
		}
		select {
		case <-ctx.Done():
			k.t.Fatal(ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}

// waitStores waits until the TidbCluster basic in ns of every data plane reports its TiKV Up.
func (k kubectl) waitStores(ctx context.Context, l *env.Lab, ns string) {
	k.t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var waiting []string
		for _, d := range l.DataPlanes {
			states := k.must(ctx, d.Cluster, nil, "get", "tidbcluster", "basic", "-n", ns, "-o", "jsonpath={.status.tikv.stores.*.state}")
			if states != "Up" {
				waiting = append(waiting, fmt.Sprintf("%s: stores %q", d.Cluster, states))
			}
		}
		if len(waiting) == 0 {
			return
		}
		if time.Now().After(deadline) {
			k.t.Fatalf("TiKV of %s/basic not Up: %v", ns, waiting)
		}
		select {
		case <-ctx.Done():
			k.t.Fatal(ctx.Err())
		case <-time.After(2 * time.Second):
		}
	}
}
