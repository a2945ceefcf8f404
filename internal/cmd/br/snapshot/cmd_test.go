package snapshot

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/pause"
	"github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/meta"
)

func execute(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := NewCmd()
	cmd.SetArgs(args)
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = cmd.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}

func TestBadFlags(t *testing.T) {
	dir := t.TempDir()
	status := filepath.Join(dir, "status.json")
	notObject := filepath.Join(dir, "not-an-object.yaml")
	if err := os.WriteFile(notObject, []byte("just: data\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--backup-id", "b", "--pd", "x:1"}, "--storage is required"},
		{[]string{"-s", dir, "--pd", "x:1"}, "--backup-id is required"},
		{[]string{"-s", dir, "--backup-id", "b"}, "--pd is required"},
		{[]string{"-s", dir, "--backup-id", "a/b", "--pd", "x:1"}, "--backup-id"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--pause-status", status, "--backup-ts", "5"}, "use one"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--manifest", notObject}, "needs kind and metadata.name"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--check-timeout", "0s"}, "must be positive"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--tags", "fedbr.io/backup=x"}, "--tags"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--owner", "uid-without-namespace"}, "--owner"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--volumes", filepath.Join(dir, "missing.json")}, "--volumes"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "extra"}, "unknown command"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--member", "vb", "--member-namespace", "A"}, `--member-namespace "A" is not a valid namespace`},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--member-namespace", "ns"}, "need --member"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--wait-backup-ts"}, "--wait-backup-ts reads the backup ts from --member"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--wait-backup-ts", "--backup-ts", "5", "--member", "vb"}, "excludes --pause-status and --backup-ts"},
		{[]string{"-s", dir, "--backup-id", "b", "--pd", "x:1", "--wait-backup-ts", "--pause-status", status, "--member", "vb"}, "excludes --pause-status and --backup-ts"},
	} {
		_, _, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	cmd := NewCmd()
	for _, name := range []string{"storage", "region", "aws-endpoint", "backup-id", "cluster", "pd", "volumes", "pause-status", "backup-ts",
		"skip-cluster-check", "check-timeout", "check-interval", "tags", "owner", "cleanup-timeout", "progress-file", "pause-ttl", "manifest",
		"member", "member-namespace", "kubeconfig"} {
		f := cmd.Flags().Lookup(name)
		if f == nil || f.Usage == "" {
			t.Errorf("flag --%s is missing or undocumented", name)
		}
	}
}

type fixture struct {
	url     string
	srv     *awsdouble.Server
	dir     string
	volumes string
}

// newFixture serves the AWS double with two instances and writes a volume file for them.
func newFixture(t *testing.T) fixture {
	t.Helper()
	srv, err := awsdouble.Open(t.TempDir(), awsdouble.Options{})
	awsdoubletest.Credentials(t)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close()
	})
	f := fixture{url: hs.URL, srv: srv, dir: t.TempDir()}
	rec := &meta.Record{TiKV: meta.TiKV{Replicas: 2}}
	for i := range 2 {
		in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}}})
		if err != nil {
			t.Fatal(err)
		}
		rec.TiKV.Stores = append(rec.TiKV.Stores, meta.TiKVStore{ID: uint64(i + 1), Volumes: []meta.Volume{{ID: in.Volumes[0].ID, Type: meta.DataDirType}}})
	}
	b, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	f.volumes = filepath.Join(t.TempDir(), "backup.json")
	if err := os.WriteFile(f.volumes, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

func writeStatus(t *testing.T, st pause.Status) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "pause.json")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSnapshotWithPause: with a Ready pause, the backup ts is the pause's, the volume file
// drives the snapshots, and the summary, progress file and completed backupmeta agree.
func TestSnapshotWithPause(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	const ts = 461000000000000000
	status := writeStatus(t, pause.Status{Phase: pause.PhaseReady, BackupTS: ts, Stores: 3})
	progress := filepath.Join(t.TempDir(), "progress.json")
	manifestFile := filepath.Join(t.TempDir(), "tc.yaml")
	if err := os.WriteFile(manifestFile, []byte("apiVersion: pingcap.com/v1alpha1\nkind: TidbCluster\nmetadata:\n  name: basic\n  namespace: tidb\nspec: {}\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: tidb\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, logs, err := execute(t, "-s", f.dir, "--aws-endpoint", f.url, "--region", "us-west-2", "--backup-id", "bk-cmd",
		"--pd", c.PDAddr(), "--pause-status", status, "--volumes", f.volumes, "--progress-file", progress, "--check-interval", "50ms",
		"--manifest", manifestFile)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if res.ResolvedTS != ts || len(res.Snapshots) != 2 {
		t.Fatalf("summary = %+v", res)
	}
	var p snapshot.Progress
	if b, err := os.ReadFile(progress); err != nil || json.Unmarshal(b, &p) != nil || p.Phase != snapshot.PhaseCompleted || p.Percent != 100 {
		t.Errorf("progress file = %+v, %v", p, err)
	}
	d, err := blob.NewDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := meta.NewStore(d, nil).BackupMeta(ctx)
	if err != nil || rec.ClusterInfo.ResolvedTS != ts || rec.Fedbr.BackupID != "bk-cmd" {
		t.Fatalf("backupmeta = %+v, %v", rec, err)
	}
	if !strings.Contains(logs, "Every snapshot started") {
		t.Errorf("logs:\n%s", logs)
	}
	for _, key := range []string{meta.ManifestKey("tidb", "TidbCluster", "basic"), meta.ManifestKey("_cluster", "Namespace", "tidb")} {
		if _, err := d.Get(ctx, key, meta.MaxManifestBytes); err != nil {
			t.Errorf("manifest %s not stored: %v", key, err)
		}
	}
}

// TestSnapshotAloneHoldsItsOwnPause: with neither --pause-status nor --backup-ts, the step
// pauses the cluster itself, snapshots at the pause's backup ts and lifts the pause.
func TestSnapshotAloneHoldsItsOwnPause(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	out, logs, err := execute(t, "-s", f.dir, "--aws-endpoint", f.url, "--region", "us-west-2", "--backup-id", "bk-alone",
		"--pd", c.PDAddr(), "--volumes", f.volumes, "--check-interval", "50ms", "--pause-ttl", "1m")
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	var res snapshot.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if res.ResolvedTS == 0 || len(res.Snapshots) != 2 {
		t.Fatalf("summary = %+v", res)
	}
	for _, want := range []string{"pause: All ready", "Every snapshot started", "pause: Pause lifted"} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %q:\n%s", want, logs)
		}
	}
	if strings.Index(logs, "pause: Pause lifted") < strings.Index(logs, "Every snapshot started") {
		t.Errorf("the pause was lifted before every snapshot started:\n%s", logs)
	}
}

// TestPauseNotReady: a pause that is not Ready is a clear error before any snapshot.
func TestPauseNotReady(t *testing.T) {
	f := newFixture(t)
	status := writeStatus(t, pause.Status{Phase: pause.PhaseGCPaused, BackupTS: 5})
	_, _, err := execute(t, "-s", f.dir, "--aws-endpoint", f.url, "--region", "us-west-2", "--backup-id", "bk-cmd",
		"--pd", "127.0.0.1:1", "--pause-status", status, "--volumes", f.volumes)
	if err == nil || !strings.Contains(err.Error(), "the pause is GCPaused, not Ready") {
		t.Fatalf("err = %v, want a not-Ready error", err)
	}
	if n := len(f.srv.Inventory(nil).Snapshots); n != 0 {
		t.Errorf("%d snapshots taken", n)
	}
	if _, err := os.Stat(filepath.Join(f.dir, meta.BackupMetaKey)); !os.IsNotExist(err) {
		t.Errorf("backupmeta written: %v", err)
	}
}
