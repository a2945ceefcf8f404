package restore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
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
		r, err := Build(backup(fedv1alpha1.VolumeBackupComplete), Options{Name: "drill", Into: "dr", TCName: "restored", Verify: true, Scratch: true})
		if err != nil {
			t.Fatal(err)
		}
		if r.Name != "drill" || r.Spec.Clusters[1].TCName != "restored" || r.Spec.Clusters[1].TCNamespace != "dr" || !r.Spec.Template.Verify || !r.Spec.Template.Scratch {
			t.Errorf("restore %s, cluster %+v, verify %v, scratch %v", r.Name, r.Spec.Clusters[1], r.Spec.Template.Verify, r.Spec.Template.Scratch)
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

// TestCreateWithTidbClusters: --with-tidbclusters reads each plane's saved TidbCluster from the
// backup's S3 storage (the AWS double) and makes the one the restore needs. -o yaml prints the
// VolumeRestore and one TidbCluster per plane in recovery mode in --into, joining the restored
// cluster; --dry-run has the API server check each; a real create makes the TidbCluster, then
// the VolumeRestore; run again, it stops at the TidbCluster that exists, creating nothing. A
// plane whose storage saved no such TidbCluster is named. The data planes here are contexts of
// the one API server.
func TestCreateWithTidbClusters(t *testing.T) {
	if env == nil {
		t.Skip("needs the API server")
	}
	ctx := context.Background()
	lab := awsdoubletest.Serve(t, awsdouble.Options{}, "")
	if err := awsdouble.CreateBucket(ctx, lab.Endpoint, "acme"); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"tidb-tc", "tidb-tc-restore"} {
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	save := func(plane, yamlText string) {
		t.Helper()
		s := session.Flags{Storage: "s3://acme/tidb-tc/nightly-" + plane + "?region=us-west-2", Endpoint: lab.Endpoint}
		store, err := s.Store(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.PutManifest(ctx, "tidb-tc", "TidbCluster", "basic", []byte(yamlText)); err != nil {
			t.Fatal(err)
		}
	}
	const first = "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata: {name: basic, namespace: tidb-tc, uid: u1, resourceVersion: \"7\"}\n" +
		"spec: {version: v7.5.0, acrossK8s: true, pd: {replicas: 1}, tikv: {replicas: 1}}\nstatus: {}\n"
	const joining = "apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata: {name: basic, namespace: tidb-tc}\n" +
		"spec: {version: v7.5.0, acrossK8s: true, cluster: {name: basic, namespace: tidb-tc, clusterDomain: usw2a.local}, pd: {replicas: 1}, tikv: {replicas: 1}}\n"
	save("usw2a", first)
	save("usw2b", joining)
	mk := func(name string, planes ...string) {
		t.Helper()
		b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tidb-tc"}}
		b.Spec.Template.StorageProvider = fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Region: "us-west-2", Bucket: "acme", Prefix: "tidb-tc/nightly"}}
		for _, p := range planes {
			b.Spec.Clusters = append(b.Spec.Clusters, fedv1alpha1.VolumeBackupMemberCluster{K8sClusterName: p, TCName: "basic", TCNamespace: "tidb-tc"})
		}
		if err := env.Client.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		b.Status.Phase = fedv1alpha1.VolumeBackupComplete
		if err := env.Client.Status().Update(ctx, b); err != nil {
			t.Fatal(err)
		}
	}
	mk("nightly", "usw2a", "usw2b", "usw2c")
	// The data planes' kubeconfig: a context per plane, each this API server as its admin.
	kc, err := clientcmd.LoadFromFile(env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cur := kc.Contexts[kc.CurrentContext]
	for _, p := range []string{"usw2a", "usw2b", "usw2c"} {
		kc.Contexts[p] = &clientcmdapi.Context{Cluster: cur.Cluster, AuthInfo: cur.AuthInfo}
	}
	planes := filepath.Join(t.TempDir(), "planes")
	if err := clientcmd.WriteToFile(*kc, planes); err != nil {
		t.Fatal(err)
	}
	args := func(extra ...string) []string {
		return append([]string{"-n", "tidb-tc", "--from-backup", "nightly", "--into", "tidb-tc-restore", "--with-tidbclusters",
			"--aws-endpoint", lab.Endpoint, "--planes-kubeconfig", planes}, extra...)
	}

	if _, err := run(args("-o", "yaml")...); err == nil || !strings.Contains(err.Error(), "data plane usw2c (s3://acme/tidb-tc/nightly-usw2c?region=us-west-2): the backup saved no TidbCluster tidb-tc/basic") {
		t.Fatalf("a plane without its saved TidbCluster: %v", err)
	}
	save("usw2c", joining)
	out, err := run(args("-o", "yaml")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	docs := strings.Split(out, "---\n")
	if len(docs) != 4 {
		t.Fatalf("-o yaml printed %d documents, want the VolumeRestore and 3 TidbClusters:\n%s", len(docs), out)
	}
	for i, p := range []string{"usw2a", "usw2b", "usw2c"} {
		doc := docs[i+1]
		var tc struct {
			Metadata map[string]any `json:"metadata"`
			Spec     struct {
				RecoveryMode bool              `json:"recoveryMode"`
				Cluster      map[string]string `json:"cluster"`
			} `json:"spec"`
			Status any `json:"status"`
		}
		if err := yaml.Unmarshal([]byte(doc), &tc); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(doc, "# data plane "+p+"\n") || !tc.Spec.RecoveryMode || tc.Metadata["namespace"] != "tidb-tc-restore" || tc.Metadata["uid"] != nil || tc.Status != nil {
			t.Errorf("TidbCluster of %s:\n%s", p, doc)
		}
		if p != "usw2a" && tc.Spec.Cluster["namespace"] != "tidb-tc-restore" {
			t.Errorf("TidbCluster of %s joins %v, want the restored one in tidb-tc-restore", p, tc.Spec.Cluster)
		}
	}
	tcKey := client.ObjectKey{Namespace: "tidb-tc-restore", Name: "basic"}
	tcExists := func() bool {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("pingcap.com/v1alpha1")
		u.SetKind("TidbCluster")
		err := env.Client.Get(ctx, tcKey, u)
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	if out, err := run(args("--dry-run")...); err != nil || strings.Count(out, "checked (--dry-run), not created") != 3 {
		t.Fatalf("--dry-run: %v\n%s", err, out)
	}
	if tcExists() {
		t.Fatal("--dry-run created a TidbCluster")
	}
	if _, err := run(args("-o", "json")...); err == nil || !strings.Contains(err.Error(), "use -o yaml") {
		t.Errorf("-o json: %v", err)
	}
	if _, err := run("-n", "tidb-tc", "--from-backup", "nightly", "--into", "tidb-tc-restore", "--with-tidbclusters", "--aws-endpoint", lab.Endpoint); err == nil ||
		!strings.Contains(err.Error(), "--planes-kubeconfig") {
		t.Errorf("no --planes-kubeconfig: %v", err)
	}
	if _, err := run(args("--scratch")...); err == nil || !strings.Contains(err.Error(), "--with-tidbclusters and --scratch both make the TidbClusters") {
		t.Errorf("--scratch with --with-tidbclusters: %v", err)
	}

	mk("single", "usw2a")
	one := func(name string) (string, error) {
		return run("-n", "tidb-tc", name, "--from-backup", "single", "--into", "tidb-tc-restore", "--with-tidbclusters",
			"--aws-endpoint", lab.Endpoint, "--planes-kubeconfig", planes)
	}
	if out, err := one("single"); err != nil || !strings.Contains(out, "data plane usw2a: TidbCluster tidb-tc-restore/basic in recovery mode created") {
		t.Fatalf("create: %v\n%s", err, out)
	}
	if !tcExists() {
		t.Fatal("no TidbCluster created")
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "tidb-tc", Name: "single"}, &fedv1alpha1.VolumeRestore{}); err != nil {
		t.Fatalf("the VolumeRestore: %v", err)
	}
	if _, err := one("again"); !errors.Is(err, ErrTidbClusterExists) {
		t.Errorf("run again: %v; want %v", err, ErrTidbClusterExists)
	}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: "tidb-tc", Name: "again"}, &fedv1alpha1.VolumeRestore{}); !apierrors.IsNotFound(err) {
		t.Errorf("the refused run created its VolumeRestore: %v", err)
	}
}
