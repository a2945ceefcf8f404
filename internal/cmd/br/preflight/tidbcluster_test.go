package preflight

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestTidbClusterChecks: --tidbcluster reads each TidbCluster from the API server and judges the
// TiKV release it names against the releases that serve the snapshot lease; a TidbCluster that
// is not there, or runs an older TiKV, fails its own line, and a release not named is not judged.
func TestTidbClusterChecks(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tidb"}}); err != nil {
		t.Fatal(err)
	}
	for name, version := range map[string]string{"new": "v8.5.0", "old": "v7.1.6", "unnamed": ""} {
		tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tidb"},
			Spec: pcv1alpha1.TidbClusterSpec{Version: version, TiKV: &pcv1alpha1.ComponentSpec{Replicas: 3}}}
		if err := env.Client.Create(ctx, tc); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := testenv.WriteKubeconfig(kubeconfig, map[string]*testenv.Env{"dp1": env}); err != nil {
		t.Fatal(err)
	}
	out, err := runPreflight(t, "--aws=false", "--kubeconfig", kubeconfig, "--tidbcluster", "tidb/new", "--tidbcluster", "tidb/unnamed")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"ok    tidbcluster tidb/new found, 3 TiKV; TiKV v8.5.0 serves the snapshot lease",
		"ok    tidbcluster tidb/unnamed found, 3 TiKV; its TiKV release is not named"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "region") {
		t.Errorf("--aws=false ran the AWS checks:\n%s", out)
	}
	out, err = runPreflight(t, "--aws=false", "--kubeconfig", kubeconfig, "--tidbcluster", "tidb/old", "--tidbcluster", "tidb/gone")
	if !errors.Is(err, ErrFailed) || !strings.Contains(out, "FAIL  tidbcluster: tidb/old: TiKV v7.1.6 does not serve PrepareSnapshotBackup") ||
		!strings.Contains(out, "FAIL  tidbcluster: tidb/gone: ") || !strings.Contains(out, "not found") {
		t.Errorf("an old TiKV and a missing TidbCluster: %v\n%s", err, out)
	}
	if _, err := runPreflight(t, "--aws=false", "--tidbcluster", "no-slash"); err == nil || !strings.Contains(err.Error(), "want NAMESPACE/NAME") {
		t.Errorf("--tidbcluster no-slash: %v", err)
	}
	if _, err := runPreflight(t, "--aws=false"); err == nil || !strings.Contains(err.Error(), "nothing to check") {
		t.Errorf("--aws=false alone: %v", err)
	}
}
