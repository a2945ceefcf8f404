package get

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/controller/volumebackupschedule"
	"github.com/fedbr/fedbr/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainPureWhenShort(m, func(e *testenv.Env) { env = e }))
}

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	c := NewCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(append(args, "--kubeconfig", env.Kubeconfig))
	err := c.ExecuteContext(context.Background())
	return out.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("get %v: %v\n%s", args, err, out)
	}
	return out
}

// lines checks that out has exactly these lines, each a regular expression matched whole
// (the ages depend on when the test runs; the rest is exact).
func lines(t *testing.T, what, out string, want ...string) {
	t.Helper()
	got := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%s: %d lines, want %d:\n%s", what, len(got), len(want), out)
	}
	for i, w := range want {
		if !regexp.MustCompile("^" + w + "$").MatchString(got[i]) {
			t.Errorf("%s: line %d is %q, want /%s/:\n%s", what, i+1, got[i], w, out)
		}
	}
}

// TestGet creates backups, a restore and a schedule in an API server and lists them as an SRE
// would.
func TestGet(t *testing.T) {
	if env == nil {
		t.Skip("needs the API server")
	}
	ctx := context.Background()
	for _, ns := range []string{"tidb", "dr"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	create := func(obj client.Object, status func()) {
		t.Helper()
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %s: %v", obj.GetName(), err)
		}
		if status != nil {
			status()
			if err := env.Client.Status().Update(ctx, obj); err != nil {
				t.Fatalf("status of %s: %v", obj.GetName(), err)
			}
		}
	}
	storage := fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}
	spec := fedv1alpha1.VolumeBackupSpec{Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: storage},
		Clusters: []fedv1alpha1.VolumeBackupMemberCluster{{K8sClusterName: "dp-a", TCName: "tc", TCNamespace: "tidb"}, {K8sClusterName: "dp-b", TCName: "tc", TCNamespace: "tidb"}}}
	nightly := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly-1", Namespace: "tidb",
		Labels: map[string]string{volumebackupschedule.ScheduleLabel: "nightly"}}, Spec: spec}
	create(nightly, func() {
		nightly.Status = fedv1alpha1.VolumeBackupStatus{Phase: fedv1alpha1.VolumeBackupComplete, BackupSize: 1 << 40, BackupSizeReadable: "1 TiB",
			CommitTs: "466000000000000000", TimeTaken: "10m2s",
			Conditions: []metav1.Condition{{Type: fedv1alpha1.VolumeBackupVerifiedCondition, Status: metav1.ConditionTrue, Reason: fedv1alpha1.VolumeRestoreChecksPassedReason,
				Message: "restore drill passed", LastTransitionTime: metav1.Now()}}}
	})
	adhoc := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "adhoc", Namespace: "tidb"}, Spec: spec}
	create(adhoc, func() { adhoc.Status = fedv1alpha1.VolumeBackupStatus{Phase: fedv1alpha1.VolumeBackupRunning} })
	elsewhere := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "copy", Namespace: "dr"}, Spec: spec}
	create(elsewhere, nil)
	restore := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: "into-dr", Namespace: "dr"},
		Spec: fedv1alpha1.VolumeRestoreSpec{Clusters: []fedv1alpha1.VolumeRestoreMemberCluster{
			{K8sClusterName: "dp-a", TCName: "tc", TCNamespace: "dr", Backup: storage}}}}
	create(restore, func() {
		restore.Status = fedv1alpha1.VolumeRestoreStatus{Phase: fedv1alpha1.VolumeRestoreComplete, CommitTs: "466000000000000000", TimeTaken: "31m"}
	})
	sched := &fedv1alpha1.VolumeBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "tidb"},
		Spec: fedv1alpha1.VolumeBackupScheduleSpec{Schedule: "@every 6h", MaxBackups: ptr.To[int32](3), BackupTemplate: spec}}
	create(sched, func() {
		last := metav1.Now()
		sched.Status = fedv1alpha1.VolumeBackupScheduleStatus{LastBackup: "nightly-1", LastBackupTime: &last}
	})

	age := `[0-9]+[smhd]`
	lines(t, "get backups -n tidb", mustRun(t, "backups", "-n", "tidb"),
		`NAME        PHASE      SIZE    COMMIT-TS            AGE`,
		`adhoc       Running    -       -                    `+age,
		`nightly-1   Complete   1 TiB   466000000000000000   `+age)
	lines(t, "get vbk -A", mustRun(t, "vbk", "-A"),
		`NAMESPACE   NAME        PHASE      SIZE    COMMIT-TS            AGE`,
		`dr          copy        -          -       -                    `+age,
		`tidb        adhoc       Running    -       -                    `+age,
		`tidb        nightly-1   Complete   1 TiB   466000000000000000   `+age)
	lines(t, "a schedule's backups (-l)", mustRun(t, "backup", "-n", "tidb", "-l", volumebackupschedule.ScheduleLabel+"=nightly"),
		`NAME        PHASE      SIZE    COMMIT-TS            AGE`,
		`nightly-1   Complete   1 TiB   466000000000000000   `+age)
	lines(t, "get backups -o wide", mustRun(t, "backups", "nightly-1", "-n", "tidb", "-o", "wide"),
		`NAME        PHASE      SIZE    INCREMENTAL   COMMIT-TS            COMMIT-TIME            TIME-TAKEN   SCHEDULE   CLUSTERS    VERIFIED   AGE`,
		`nightly-1   Complete   1 TiB   -             466000000000000000   2026-05-01T15:22:05Z   10m2s        nightly    dp-a,dp-b   True       `+age)
	lines(t, "get restores -A", mustRun(t, "restores", "--all-namespaces"),
		`NAMESPACE   NAME      PHASE      COMMIT-TS            TIME-TAKEN   AGE`,
		`dr          into-dr   Complete   466000000000000000   31m          `+age)
	lines(t, "get schedules", mustRun(t, "schedules", "-n", "tidb"),
		`NAME      SCHEDULE    PHASE    LAST-BACKUP   LAST-RUN   NEXT-RUN   AGE`,
		`nightly   @every 6h   Active   nightly-1     `+age+` +in (5h[0-9]+m|6h) +`+age)
	lines(t, "nothing in a namespace", mustRun(t, "restores", "-n", "tidb"), `No VolumeRestores found.`)

	// -o yaml: a v1 List of the objects, with their kind, without managedFields.
	var list struct {
		APIVersion, Kind string
		Items            []fedv1alpha1.VolumeBackup
	}
	out := mustRun(t, "backups", "-n", "tidb", "-o", "yaml")
	if err := yaml.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("-o yaml: %v\n%s", err, out)
	}
	if list.Kind != "List" || len(list.Items) != 2 || list.Items[1].Name != "nightly-1" || list.Items[1].Kind != "VolumeBackup" ||
		list.Items[1].APIVersion != "federation.pingcap.com/v1alpha1" || list.Items[1].Status.CommitTs != "466000000000000000" {
		t.Errorf("-o yaml:\n%s", out)
	}
	if strings.Contains(out, "managedFields") {
		t.Errorf("-o yaml prints managedFields:\n%s", out)
	}
	// -o json with one name: the object itself.
	var one fedv1alpha1.VolumeBackupSchedule
	out = mustRun(t, "schedule", "nightly", "-n", "tidb", "-o", "json")
	if err := json.Unmarshal([]byte(out), &one); err != nil || one.Name != "nightly" || one.Kind != "VolumeBackupSchedule" || one.Status.LastBackup != "nightly-1" {
		t.Errorf("-o json: %v\n%s", err, out)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pods"}, `get "pods": want backups, restores or schedules`},
		{[]string{"backups", "adhoc", "-A"}, "a name cannot be looked up in every namespace"},
		{[]string{"backups", "-o", "table"}, `--output "table": want wide, yaml or json`},
		{[]string{"backups", "-l", "a in ("}, `--selector "a in ("`},
		{[]string{"backups", "adhoc", "gone", "-n", "tidb"}, "VolumeBackup gone not found in namespace tidb"},
	} {
		out, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("get %v: %v, want an error with %q\n%s", c.args, err, c.want, out)
		}
	}
	// The names found are still listed.
	out, _ = run(t, "backups", "adhoc", "gone", "-n", "tidb")
	if !strings.Contains(out, "adhoc ") {
		t.Errorf("the found backup is not listed:\n%s", out)
	}
}
