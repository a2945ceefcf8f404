package describe

import (
	"bytes"
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestSavedLogs: `fedbr logs --saved` prints, per plane, the logs the operation's own steps
// saved under the backup's storage (not another operation's that share it), says where none
// were saved, keeps a log from driving the terminal, and refuses a step that saves none.
func TestSavedLogs(t *testing.T) {
	ctx := context.Background()
	s := runtime.NewScheme()
	if err := fedv1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	s3 := func(prefix string) fedv1alpha1.StorageProvider {
		return fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: prefix}}
	}
	b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "default"},
		Spec: fedv1alpha1.VolumeBackupSpec{Clusters: []fedv1alpha1.VolumeBackupMemberCluster{{K8sClusterName: "dp1"}, {K8sClusterName: "dp2"}},
			Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: s3("tidb/nightly")}}}
	r := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Name: "dr", Namespace: "default"},
		Spec: fedv1alpha1.VolumeRestoreSpec{Clusters: []fedv1alpha1.VolumeRestoreMemberCluster{{K8sClusterName: "dp1", Backup: s3("tidb/nightly-dp1")}}}}
	src := &Source{Control: fake.NewClientBuilder().WithScheme(s).WithObjects(b, r).Build()}

	stores := map[string]*meta.Store{}
	for _, plane := range []string{"dp1", "dp2"} {
		d, err := blob.NewDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		stores["s3://bk/tidb/nightly-"+plane] = meta.NewStore(d, nil)
	}
	put := func(storage, pod, text string) {
		key, err := meta.StepLogKey(pod)
		if err != nil {
			t.Fatal(err)
		}
		if err := stores[storage].Blob().Put(ctx, key, []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	put("s3://bk/tidb/nightly-dp1", "fed-nightly-snapshot-x7k2q", "Snapshots started\n\x1b[2Jcleared?\n")
	put("s3://bk/tidb/nightly-dp1", "fed-nightly-size-p9z4m", "Sized 3 volumes")
	put("s3://bk/tidb/nightly-dp1", "fed-dr-restore-volumes-a1b2c", "Restored 3 volumes\n")
	put("s3://bk/tidb/nightly-dp1", "fed-dr-2-restore-volumes-d3e4f", "another restore's\n")
	open := func(_ context.Context, storage string) (*meta.Store, error) { return stores[storage], nil }

	run := func(kind, name string, o LogOptions) (string, error) {
		var out bytes.Buffer
		err := src.SavedLogs(ctx, &out, kind, "default", name, o, open)
		return out.String(), err
	}
	out, err := run("backup", "nightly", LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"==> dp1/fed-nightly-snapshot-x7k2q (saved in s3://bk/tidb/nightly-dp1) <==\nSnapshots started\n?[2Jcleared?\n",
		"==> dp1/fed-nightly-size-p9z4m (saved in s3://bk/tidb/nightly-dp1) <==\nSized 3 volumes\n",
		"==> dp2: no saved logs of fed-nightly's snapshot, size under s3://bk/tidb/nightly-dp2",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "restore") || strings.Contains(out, "\x1b") {
		t.Errorf("a restore's log or an escape sequence printed:\n%q", out)
	}

	out, err = run("backup", "nightly", LogOptions{Step: "size", Plane: "dp1"})
	if err != nil || strings.Contains(out, "snapshot") || !strings.Contains(out, "Sized 3 volumes") {
		t.Errorf("--step size --plane dp1: %v\n%s", err, out)
	}
	out, err = run("restore", "dr", LogOptions{})
	if err != nil || !strings.Contains(out, "==> dp1/fed-dr-restore-volumes-a1b2c") || strings.Contains(out, "another restore") || strings.Contains(out, "Snapshots") {
		t.Errorf("restore dr: %v\n%s", err, out)
	}
	if _, err := run("backup", "nightly", LogOptions{Step: "pause"}); err == nil || !strings.Contains(err.Error(), "the pause step saves no log") {
		t.Errorf("--step pause: %v, want refused", err)
	}
	if _, err := run("backup", "missing", LogOptions{}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("a missing backup: %v", err)
	}
}
