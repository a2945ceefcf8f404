package restore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunMainPureWhenShort(m, func(e *testenv.Env) { env = e }))
}

// backup is a VolumeBackup of three planes in namespace tidb, with phase.
func backup(phase fedv1alpha1.VolumeBackupPhase) *fedv1alpha1.VolumeBackup {
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly-20261206", Namespace: "tidb"}}
	b.Spec.Template.StorageProvider = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Region: "us-west-2",
		Bucket: "acme", Prefix: "tidb/nightly/20261206"}}
	for _, p := range []string{"usw2a", "usw2b", "usw2c"} {
		b.Spec.Clusters = append(b.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: p, TCName: "basic", TCNamespace: "tidb"})
	}
	b.Status.Phase = phase
	return b
}

func TestBuild(t *testing.T) {
	s3 := func(prefix string) fedv1alpha1.StorageProvider {
		return fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Region: "us-west-2", Bucket: "acme", Prefix: prefix}}
	}
	t.Run("every plane restores from its member's prefix", func(t *testing.T) {
		r, err := Build(backup(fedv1alpha1.VolumeBackupComplete), Options{Into: "tidb-restore", Warmup: fedv1alpha1.RestoreWarmupSync})
		if err != nil {
			t.Fatal(err)
		}
		if r.Name != "nightly-20261206" || r.Namespace != "tidb" || r.Spec.Template.Warmup != fedv1alpha1.RestoreWarmupSync {
			t.Errorf("restore %s/%s, warmup %q; want the backup's name and namespace, sync", r.Namespace, r.Name, r.Spec.Template.Warmup)
		}
		want := []fedv1alpha1.VolumeRestoreMemberCluster{
			{K8sClusterName: "usw2a", TCName: "basic", TCNamespace: "tidb-restore", Backup: s3("tidb/nightly/20261206-usw2a")},
			{K8sClusterName: "usw2b", TCName: "basic", TCNamespace: "tidb-restore", Backup: s3("tidb/nightly/20261206-usw2b")},
			{K8sClusterName: "usw2c", TCName: "basic", TCNamespace: "tidb-restore", Backup: s3("tidb/nightly/20261206-usw2c")},
		}
		if d := cmp.Diff(want, r.Spec.Clusters); d != "" {
			t.Errorf("clusters (-want +got):\n%s", d)
		}
	})
	t.Run("name and TidbCluster given", func(t *testing.T) {
		r, err := Build(backup(fedv1alpha1.VolumeBackupComplete), Options{Name: "drill", Into: "dr", TCName: "restored"})
		if err != nil {
			t.Fatal(err)
		}
		if r.Name != "drill" || r.Spec.Clusters[1].TCName != "restored" || r.Spec.Clusters[1].TCNamespace != "dr" {
			t.Errorf("restore %s, cluster %+v", r.Name, r.Spec.Clusters[1])
		}
	})
	for _, tc := range []struct {
		name  string
		phase fedv1alpha1.VolumeBackupPhase
		o     Options
		want  []string
	}{
		{"a running backup", fedv1alpha1.VolumeBackupRunning, Options{Into: "dr"}, []string{`is "Running"`, ErrNotComplete.Error()}},
		{"a failed backup", fedv1alpha1.VolumeBackupFailed, Options{Into: "dr"}, []string{`is "Failed"`}},
		{"no --into", fedv1alpha1.VolumeBackupComplete, Options{}, []string{"--into is required"}},
		{"a bad namespace", fedv1alpha1.VolumeBackupComplete, Options{Into: "Tidb_Restore"}, []string{`--into "Tidb_Restore"`}},
		{"a bad TidbCluster name", fedv1alpha1.VolumeBackupComplete, Options{Into: "dr", TCName: "a/b"}, []string{`--tc "a/b"`}},
		{"a bad warm-up", fedv1alpha1.VolumeBackupComplete, Options{Into: "dr", Warmup: "later"}, []string{`--warmup "later"`}},
		{"a bad strategy", fedv1alpha1.VolumeBackupComplete, Options{Into: "dr", WarmupStrategy: "dd"}, []string{`--warmup-strategy "dd"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Build(backup(tc.phase), tc.o)
			if err == nil {
				t.Fatalf("built %+v; want refused", r)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}
}

func run(args ...string) (string, error) {
	c := NewCmd()
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(append(append([]string{"create"}, args...), "--kubeconfig", env.Kubeconfig))
	err := c.ExecuteContext(context.Background())
	return out.String(), err
}

// TestCreate creates a VolumeRestore from a Complete VolumeBackup in a real API server (its
// CRD's admission rules included): printed with -o yaml, checked with --dry-run, then created;
// a Running backup and an unknown one are refused.
func TestCreate(t *testing.T) {
	if env == nil {
		t.Skip("needs the API server")
	}
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tidb"}}); err != nil {
		t.Fatal(err)
	}
	for _, b := range []*fedv1alpha1.VolumeBackup{backup(fedv1alpha1.VolumeBackupComplete), backup(fedv1alpha1.VolumeBackupRunning)} {
		if b.Status.Phase == fedv1alpha1.VolumeBackupRunning {
			b.Name = "running"
		}
		status := b.Status
		if err := env.Client.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b.Status = status
		if err := env.Client.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	key := client.ObjectKey{Namespace: "tidb", Name: "nightly-20261206"}

	out, err := run("-n", "tidb", "--from-backup", key.Name, "--into", "tidb-restore", "-o", "yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var printed fedv1alpha1.VolumeRestore
	if err := yaml.UnmarshalStrict([]byte(out), &printed); err != nil || printed.Kind != "VolumeRestore" || len(printed.Spec.Clusters) != 3 {
		t.Fatalf("-o yaml printed (%v):\n%s", err, out)
	}
	if strings.Contains(out, "status") || strings.Contains(out, "creationTimestamp") {
		t.Errorf("-o yaml prints what an unsent object has:\n%s", out)
	}
	exists := func() bool {
		err := env.Client.Get(ctx, key, &fedv1alpha1.VolumeRestore{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if exists() {
		t.Fatal("-o yaml created the VolumeRestore")
	}
	if out, err := run("-n", "tidb", "--from-backup", key.Name, "--into", "tidb-restore", "--dry-run"); err != nil || !strings.Contains(out, "not created") {
		t.Fatalf("--dry-run: %v\n%s", err, out)
	}
	if exists() {
		t.Fatal("--dry-run created the VolumeRestore")
	}
	if out, err := run("-n", "tidb", "--from-backup", key.Name, "--into", "tidb-restore", "--warmup", "sync"); err != nil || !strings.Contains(out, "created") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	var r fedv1alpha1.VolumeRestore
	if err := env.Client.Get(ctx, key, &r); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(printed.Spec.Clusters, r.Spec.Clusters); d != "" || r.Spec.Template.Warmup != fedv1alpha1.RestoreWarmupSync {
		t.Errorf("created clusters differ from the printed ones (-printed +created):\n%s\nwarmup %q", d, r.Spec.Template.Warmup)
	}

	if _, err := run("-n", "tidb", "--from-backup", "running", "--into", "dr"); !errors.Is(err, ErrNotComplete) {
		t.Errorf("a Running backup: %v; want %v", err, ErrNotComplete)
	}
	if _, err := run("-n", "tidb", "--from-backup", "nope", "--into", "dr"); err == nil || !strings.Contains(err.Error(), "VolumeBackup nope not found in namespace tidb") {
		t.Errorf("an unknown backup: %v", err)
	}
	if _, err := run("-n", "tidb", "--into", "dr"); err == nil || !strings.Contains(err.Error(), "--from-backup is required") {
		t.Errorf("no --from-backup: %v", err)
	}
}
