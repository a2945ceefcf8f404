package describe

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/cobra"
	batchv1 "k8s.io/api/batch/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agentlease"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainPureWhenShort(m, func(e *testenv.Env) { env = e }))
}

func ctxOf(name string) *clientcmdapi.Context {
	return &clientcmdapi.Context{Cluster: name, AuthInfo: name}
}

// planesKubeconfig writes a data planes' kubeconfig: dp1 is the test's API server, dp2 a
// context whose certificate does not load, dp3 a server nothing listens on.
func planesKubeconfig(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cur := cfg.Contexts[cfg.CurrentContext]
	good := cfg.Clusters[cur.Cluster]
	user := cfg.AuthInfos[cur.AuthInfo]
	out := clientcmdapi.NewConfig()
	out.Clusters["dp1"], out.AuthInfos["dp1"] = good, user
	out.Contexts["dp1"] = ctxOf("dp1")
	bad := good.DeepCopy()
	bad.CertificateAuthorityData = []byte("not a certificate")
	out.Clusters["dp2"], out.AuthInfos["dp2"] = bad, user
	out.Contexts["dp2"] = ctxOf("dp2")
	// dp5 reads as the manager's identity does: members only (config/rbac).
	limited := user.DeepCopy()
	limited.Impersonate = "manager-remote"
	out.Clusters["dp5"], out.AuthInfos["dp5"] = good, limited
	out.Contexts["dp5"] = ctxOf("dp5")
	// dp6 reads as an SRE bound to fedbr-dataplane-viewer.
	viewer := user.DeepCopy()
	viewer.Impersonate = "sre"
	out.Clusters["dp6"], out.AuthInfos["dp6"] = good, viewer
	out.Contexts["dp6"] = ctxOf("dp6")
	gone := good.DeepCopy()
	gone.Server = "https://127.0.0.1:1"
	out.Clusters["dp3"], out.AuthInfos["dp3"] = gone, user
	out.Contexts["dp3"] = ctxOf("dp3")
	path := filepath.Join(t.TempDir(), "planes")
	if err := clientcmd.WriteToFile(*out, path); err != nil {
		t.Fatal(err)
	}
	return path
}

func execute(t *testing.T, newCmd func() *cobra.Command, args ...string) (string, error) {
	t.Helper()
	c := newCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.ExecuteContext(context.Background())
	return out.String(), err
}

// bindRole creates the ClusterRole of config/rbac/file and binds it to user.
func bindRole(t *testing.T, ctx context.Context, file, user string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.RepoRoot, "config", "rbac", file))
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal(b, &role); err != nil {
		t.Fatal(err)
	}
	create(t, ctx, &role)
	create(t, ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name + "-" + user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: user}}})
}

func create(t *testing.T, ctx context.Context, obj client.Object) {
	t.Helper()
	if err := env.Client.Create(ctx, obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
}

func TestDescribeAndLogsAcrossPlanes(t *testing.T) {
	if env == nil {
		t.Skip("needs the API server")
	}
	ctx := context.Background()
	planes := planesKubeconfig(t)
	create(t, ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tidb"}})
	bindRole(t, ctx, "manager_dataplane_role.yaml", "manager-remote")
	bindRole(t, ctx, "dataplane_viewer_role.yaml", "sre")

	storage := fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}
	vb := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default",
		Labels: map[string]string{volumebackupschedule.ScheduleLabel: "daily"}},
		Spec: fedv1alpha1.VolumeBackupSpec{Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: storage},
			Clusters: []fedv1alpha1.VolumeBackupMemberCluster{
				{K8sClusterName: "dp1", TCName: "tc", TCNamespace: "tidb"},
				{K8sClusterName: "dp2", TCName: "tc", TCNamespace: "tidb"},
				{K8sClusterName: "dp3", TCName: "tc", TCNamespace: "tidb"},
				{K8sClusterName: "dp4", TCName: "tc", TCNamespace: "tidb"},
				{K8sClusterName: "dp5", TCName: "tc", TCNamespace: "tidb"},
				{K8sClusterName: "dp6", TCName: "tc", TCNamespace: "tidb"},
			}}}
	create(t, ctx, vb)
	vb.Status = fedv1alpha1.VolumeBackupStatus{Phase: fedv1alpha1.VolumeBackupRunning, Initializer: "dp1", CommitTs: "470000000000000000",
		Conditions: []metav1.Condition{{Type: fedv1alpha1.VolumeBackupGCPausedCondition, Status: metav1.ConditionTrue, Reason: "Paused",
			Message: "the initializer's pause holds", LastTransitionTime: metav1.Now()}}}
	if err := env.Client.Status().Update(ctx, vb); err != nil {
		t.Fatal(err)
	}
	create(t, ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "nightly.1", Namespace: "default"},
		InvolvedObject: corev1.ObjectReference{Kind: "VolumeBackup", Namespace: "default", Name: "nightly", UID: vb.UID},
		Reason:         "MembersCreated", Message: "created 4 members", Type: corev1.EventTypeNormal, LastTimestamp: metav1.Now(), Count: 1})

	// dp1 holds the member, with a running snapshot step.
	m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "fed-nightly", Namespace: "tidb",
		Labels: map[string]string{dpv1alpha1.LabelOwnerUID: string(vb.UID)}},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "nightly", K8sClusterName: "dp1", TCName: "tc", TCNamespace: "tidb",
			Phase: dpv1alpha1.BackupMemberExecute, Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: storage}}}
	create(t, ctx, m)
	since := metav1.NewMicroTime(time.Now().Add(-20 * time.Second))
	m.Status = dpv1alpha1.VolumeBackupMemberStatus{Phase: "Snapshotting", BackupPath: "s3://bk/p-dp1",
		Steps: []dpv1alpha1.StepReport{{Name: dpv1alpha1.StepSnapshot, Phase: "Waiting", Done: 1, Total: 3, Percent: 40, Since: &since}}}
	if err := env.Client.Status().Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	labels := job.Selector("fed-nightly")
	labels[job.LabelStep] = dpv1alpha1.StepSnapshot
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "fed-nightly-snapshot", Namespace: "tidb", Labels: labels},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To[int32](0), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: job.ContainerName, Image: "fedbr"}}}}}}
	create(t, ctx, j)
	create(t, ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fed-nightly-snapshot-abcde", Namespace: "tidb", Labels: labels,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: j.Name, UID: j.UID}}},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: job.ContainerName, Image: "fedbr"}}}})
	create(t, ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "snap.1", Namespace: "tidb"},
		InvolvedObject: corev1.ObjectReference{Kind: "Job", Namespace: "tidb", Name: j.Name, UID: j.UID},
		Reason:         "SuccessfulCreate", Message: "Created pod: fed-nightly-snapshot-abcde", Type: corev1.EventTypeNormal, LastTimestamp: metav1.Now(), Count: 1})
	create(t, ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "unrelated.1", Namespace: "tidb"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "tidb", Name: "someone-else"},
		Reason:         "Unrelated", Message: "not ours", Type: corev1.EventTypeNormal, LastTimestamp: metav1.Now(), Count: 1})

	out, err := execute(t, NewDescribeCmd, "backup", "nightly", "-n", "default", "--kubeconfig", env.Kubeconfig,
		"--planes-kubeconfig", planes, "--request-timeout", "5s")
	if err != nil {
		t.Fatalf("describe: %v\n%s", err, out)
	}
	for _, want := range []string{
		"VolumeBackup default/nightly",
		"Phase: Running",
		"Commit ts: 470000000000000000",
		"the initializer's pause holds",
		"MembersCreated",
		"Member tidb/fed-nightly in data plane dp1",
		"snapshot: Waiting for ",
		// One read: the estimate needs two (describe --watch).
		"1/3 snapshots completed, 40.0%, estimating\n",
		"fed-nightly-snapshot (snapshot): Active (0 running)",
		"pod fed-nightly-snapshot-abcde: ",
		"SuccessfulCreate",
		"Member tidb/fed-nightly in data plane dp2\n  data plane unreachable: context dp2: ",
		"Member tidb/fed-nightly in data plane dp3\n  cannot read the member: ",
		"Member tidb/fed-nightly in data plane dp4\n  data plane dp4 is not in the data planes' kubeconfig",
		// The manager's identity reads the member, not its Jobs: the member is still shown.
		"Member tidb/fed-nightly in data plane dp5\n  Phase: Snapshotting\n  Backup path: s3://bk/p-dp1\n  cannot list the step Jobs: ",
		// The viewer role reads everything describe shows.
		"Member tidb/fed-nightly in data plane dp6\n  Phase: Snapshotting\n  Backup path: s3://bk/p-dp1\n  Steps:",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("describe output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("describe backup:\n%s", out)
	if strings.Contains(out, "not ours") {
		t.Errorf("describe shows another object's event:\n%s", out)
	}
	// No agent Lease in dp1 (admin): its member says no agent runs there. The manager's identity
	// (dp5) may not read the Lease here: that is no finding, and nothing is said.
	noAgent := "no agent runs for this data plane: no Lease fedbr-system/fedbr-agent-dp1"
	if !strings.Contains(out, noAgent) || strings.Contains(out, "fedbr-agent-dp5") {
		t.Errorf("describe output: want %q, and nothing of dp5's Lease:\n%s", noAgent, out)
	}
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentlease.DefaultNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	create(t, ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: agentlease.DefaultNamespace, Name: agentlease.Name("dp1")},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("fedbr-agent-0_1"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}})
	if out, _ := execute(t, NewDescribeCmd, "backup", "nightly", "-n", "default", "--kubeconfig", env.Kubeconfig,
		"--planes-kubeconfig", planes, "--request-timeout", "5s"); strings.Contains(out, "fedbr-agent-dp1") {
		t.Errorf("describe output names dp1's agent Lease although an agent holds it:\n%s", out)
	}

	// The schedule lists its backup.
	create(t, ctx, &fedv1alpha1.VolumeBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "daily", Namespace: "default"},
		Spec: fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "@daily", MaxBackups: ptr.To[int32](3), BackupTemplate: vb.Spec,
			Verify: &fedv1alpha1.ScheduleVerify{Namespace: "tidb-drill", Every: ptr.To[int32](7)}}})
	out, err = execute(t, NewDescribeCmd, "schedule", "daily", "-n", "default", "--kubeconfig", env.Kubeconfig, "--planes-kubeconfig", planes)
	if err != nil {
		t.Fatalf("describe schedule: %v\n%s", err, out)
	}
	for _, want := range []string{"VolumeBackupSchedule default/daily", "Schedule: @daily", "Max backups: 3", "Drills: every 7 backup(s), into namespace tidb-drill", "nightly  Running"} {
		if !strings.Contains(out, want) {
			t.Errorf("schedule output lacks %q:\n%s", want, out)
		}
	}

	// Logs: envtest runs no kubelet, so the pod's log cannot be read; it is said in place, and the
	// unreachable planes are reported without stopping the rest.
	out, err = execute(t, NewLogsCmd, "backup", "nightly", "-n", "default", "--kubeconfig", env.Kubeconfig, "--planes-kubeconfig", planes,
		"--request-timeout", "5s", "--step", "snapshot")
	if err != nil {
		t.Fatalf("logs: %v\n%s", err, out)
	}
	for _, want := range []string{"==> dp1/tidb/fed-nightly-snapshot-abcde (step snapshot) <==\n(no logs: ", "==> dp2: unreachable: ", "==> dp4: not in the data planes' kubeconfig <=="} {
		if !strings.Contains(out, want) {
			t.Errorf("logs output lacks %q:\n%s", want, out)
		}
	}

	// Errors a user can make get a clear message.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "nope", "-n", "default"}, "VolumeBackup default/nope: not found"},
		{[]string{"volume", "nightly", "-n", "default"}, `describe "volume": want one of backup, restore, schedule`},
		{[]string{"backup", "nightly", "-n", "default", "--planes-kubeconfig", "", "--planes-secret", "nosuch"}, `--planes-secret "nosuch": want NAMESPACE/NAME`},
		{[]string{"backup", "nightly", "-n", "default", "--planes-kubeconfig", "", "--planes-secret", "fedbr-system/missing"}, "read the data planes' kubeconfig from Secret fedbr-system/missing"},
	} {
		args := append([]string{"--kubeconfig", env.Kubeconfig, "--planes-kubeconfig", planes}, c.args...)
		_, err := execute(t, NewDescribeCmd, args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("describe %v: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// syncBuffer is a bytes.Buffer that a running command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the output holds want (the watch's next read shows it), or fails.
func waitFor(t *testing.T, out *syncBuffer, done chan error, want string) {
	t.Helper()
	deadline := time.After(time.Minute)
	for !strings.Contains(out.String(), want) {
		select {
		case err := <-done:
			if strings.Contains(out.String(), want) { // its last words
				done <- err
				return
			}
			t.Fatalf("describe --watch ended (%v) before showing %q:\n%s", err, want, out.String())
		case <-deadline:
			t.Fatalf("describe --watch did not show %q within a minute:\n%s", want, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestDescribeWatch watches a backup through its snapshot step to Complete: the first view
// estimates nothing (one read of the percent), a later one estimates the time left from the
// percent's rise between reads, and the watch ends by itself at Complete.
func TestDescribeWatch(t *testing.T) {
	if env == nil {
		t.Skip("needs the API server")
	}
	ctx := context.Background()
	planes := planesKubeconfig(t)
	create(t, ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "watched"}})
	storage := fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}
	vb := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: "default"},
		Spec: fedv1alpha1.VolumeBackupSpec{Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: storage},
			Clusters: []fedv1alpha1.VolumeBackupMemberCluster{{K8sClusterName: "dp1", TCName: "tc", TCNamespace: "watched"}}}}
	create(t, ctx, vb)
	vb.Status = fedv1alpha1.VolumeBackupStatus{Phase: fedv1alpha1.VolumeBackupSnapshotsCreated}
	if err := env.Client.Status().Update(ctx, vb); err != nil {
		t.Fatal(err)
	}
	m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: "fed-watched", Namespace: "watched",
		Labels: map[string]string{dpv1alpha1.LabelOwnerUID: string(vb.UID)}},
		Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "watched", K8sClusterName: "dp1", TCName: "tc", TCNamespace: "watched",
			Phase: dpv1alpha1.BackupMemberExecute, Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: storage}}}
	create(t, ctx, m)
	since := metav1.NewMicroTime(time.Now())
	setPercent := func(p float64) {
		t.Helper()
		m.Status = dpv1alpha1.VolumeBackupMemberStatus{Phase: "Snapshotting",
			Steps: []dpv1alpha1.StepReport{{Name: dpv1alpha1.StepSnapshot, Phase: "Waiting", Done: 1, Total: 3, Percent: p, Since: &since}}}
		if err := env.Client.Status().Update(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	setPercent(40)

	out := &syncBuffer{}
	c := NewDescribeCmd()
	c.SetOut(out)
	c.SetErr(out)
	c.SetArgs([]string{"backup", "watched", "-n", "default", "--kubeconfig", env.Kubeconfig, "--planes-kubeconfig", planes,
		"--request-timeout", "5s", "--watch", "--interval", "100ms"})
	done := make(chan error, 1)
	go func() { done <- c.ExecuteContext(ctx) }()

	waitFor(t, out, done, "1/3 snapshots completed, 40.0%, estimating\n")
	setPercent(70)
	waitFor(t, out, done, "1/3 snapshots completed, 70.0%, about ")
	vb.Status.Phase = fedv1alpha1.VolumeBackupComplete
	if err := env.Client.Status().Update(ctx, vb); err != nil {
		t.Fatal(err)
	}
	waitFor(t, out, done, "VolumeBackup default/watched reached Complete.\n")
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("describe --watch: %v\n%s", err, out.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("describe --watch did not end at Complete:\n%s", out.String())
	}
	got := out.String()
	t.Logf("describe --watch:\n%s", got)
	if n := strings.Count(got, "VolumeBackup default/watched\n"); n < 3 {
		t.Errorf("%d views drawn, want at least 3 (40 %%, 70 %%, Complete)", n)
	}
	if !strings.Contains(got, "\n--- ") {
		t.Errorf("the views are not separated by a time line:\n%s", got)
	}
}

// TestDescribeRunsNoCredentialPlugin: the data planes' kubeconfig (here a file; the same for the
// Secret) names exec credential plugins. A plugin other than the EKS token commands is refused
// when the kubeconfig loads; an "aws eks get-token" user gets its token minted in-process. Both
// commands are scripts that would leave a marker file: neither exists afterwards, so nothing
// named in the kubeconfig was run on this machine.
func TestDescribeRunsNoCredentialPlugin(t *testing.T) {
	if env == nil {
		t.Skip("needs the API server")
	}
	ctx := context.Background()
	dir := t.TempDir()
	script := func(name string) (path, marker string) {
		path, marker = filepath.Join(dir, "bin", name), filepath.Join(dir, name+".ran")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("#!/bin/sh\ntouch "+marker+"\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path, marker
	}
	kubelogin, kubeloginRan := script("kubelogin")
	aws, awsRan := script("aws")
	// The in-process EKS token is signed with this machine's AWS identity from the environment.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	t.Setenv("AWS_SESSION_TOKEN", "")

	cfg, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	server := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
	out := clientcmdapi.NewConfig()
	out.Clusters["dp-exec"], out.Contexts["dp-exec"] = server, ctxOf("dp-exec")
	out.AuthInfos["dp-exec"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1",
		Command: kubelogin, Args: []string{"get-token"}, InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	out.Clusters["dp-eks"], out.Contexts["dp-eks"] = server, ctxOf("dp-eks")
	out.AuthInfos["dp-eks"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{APIVersion: "client.authentication.k8s.io/v1beta1",
		Command: aws, Args: []string{"eks", "get-token", "--cluster-name", "dp-eks", "--region", "us-east-1"},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}}
	planes := filepath.Join(dir, "planes")
	if err := clientcmd.WriteToFile(*out, planes); err != nil {
		t.Fatal(err)
	}
	create(t, ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plugins"}})
	vb := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "plugins", Namespace: "default"},
		Spec: fedv1alpha1.VolumeBackupSpec{Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: fedv1alpha1.StorageProvider{
			S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}},
			Clusters: []fedv1alpha1.VolumeBackupMemberCluster{
				{K8sClusterName: "dp-exec", TCName: "tc", TCNamespace: "plugins"},
				{K8sClusterName: "dp-eks", TCName: "tc", TCNamespace: "plugins"},
			}}}
	create(t, ctx, vb)

	for _, run := range []struct {
		newCmd func() *cobra.Command
		args   []string
		want   []string
	}{
		{NewDescribeCmd, []string{"backup", "plugins"}, []string{
			`Member plugins/fed-plugins in data plane dp-exec` + "\n" + `  data plane unreachable: context dp-exec: user "dp-exec" runs exec plugin "` + kubelogin + `": fedbr runs no credential plugin`,
			// The token minted in-process reaches the API server, which does not know it (401).
			"Member plugins/fed-plugins in data plane dp-eks\n  cannot read the member: ",
			"the server has asked for the client to provide credentials",
		}},
		{NewLogsCmd, []string{"backup", "plugins"}, []string{`==> dp-exec: unreachable: context dp-exec: user "dp-exec" runs exec plugin`}},
	} {
		got, err := execute(t, run.newCmd, append(run.args, "-n", "default", "--kubeconfig", env.Kubeconfig, "--planes-kubeconfig", planes, "--request-timeout", "5s")...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", run.args, err, got)
		}
		for _, want := range run.want {
			if !strings.Contains(got, want) {
				t.Errorf("%v output lacks %q:\n%s", run.args, want, got)
			}
		}
	}
	// The commands have returned: every request they made is done.
	for _, marker := range []string{kubeloginRan, awsRan} {
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the credential plugin named in the data planes' kubeconfig ran on this machine (%s: %v)", marker, err)
		}
	}
}
