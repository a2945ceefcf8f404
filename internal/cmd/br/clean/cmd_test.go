package clean

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	brclean "github.com/fedbr/fedbr/internal/br/clean"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/meta"
)

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--storage is required"},
		{[]string{"-s", "/tmp/x", "--delete-ratio", "0.05"}, "--delete-ratio 0.05"},
		{[]string{"-s", "/tmp/x", "--delete-ratio", "2.5"}, "--delete-ratio 2.5"},
		{[]string{"-s", "/tmp/x", "--backup-outcome", "maybe"}, "--backup-outcome"},
		{[]string{"-s", "/tmp/x", "--backup-id", "a/b"}, "--backup-id"},
		{[]string{"-s", "/tmp/x", "--expect-volumes", "vol-1,sda"}, `--expect-volumes: expected volume "sda"`},
		{[]string{"-s", "/tmp/x", "--settle-timeout", "-1s"}, "--settle-timeout"},
		{[]string{"-s", "/tmp/x", "--source-namespaces", ""}, "--source-namespaces: no namespace"},
		{[]string{"-s", "/tmp/x", "--source-namespaces", "tidb,team-[a"}, `--source-namespaces: namespace pattern "team-[a": not a glob`},
		{[]string{"-s", "gs://bucket/x"}, "only s3://"},
		{[]string{"-s", "s3:///x"}, "want s3://BUCKET"},
		{[]string{"-s", "/tmp/x", "--aws-endpoint", "127.0.0.1:4566"}, "--aws-endpoint"},
		{[]string{"-s", "/tmp/x", "extra"}, "unknown command"},
		{[]string{"-s", "/tmp/x", "--member", "vb", "--member-namespace", "Tidb"}, `--member-namespace "Tidb" is not a valid namespace`},
		{[]string{"-s", "/tmp/x", "--kubeconfig", "/k"}, "need --member"},
	} {
		cmd := NewCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	cmd := NewCmd()
	for _, name := range []string{"storage", "region", "aws-endpoint", "backup-id", "backup-outcome", "delete-ratio", "dry-run", "accept-missing-meta",
		"expect-volumes", "settle-timeout", "source-namespaces", "member", "member-namespace", "kubeconfig"} {
		f := cmd.Flags().Lookup(name)
		if f == nil || f.Usage == "" {
			t.Errorf("flag --%s is missing or undocumented", name)
		}
	}
}

type fixture struct {
	url   string
	dir   string
	srv   *awsdouble.Server
	store *meta.Store
}

// newFixture serves the AWS double and writes a completed backup of one store (two
// volumes) tagged b1 into a directory prefix.
func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
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
	p, err := aws.New(ctx, aws.Config{Region: "us-west-2", Endpoint: hs.URL, Budget: budget.New(budget.ClientLimits(), nil), PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}, Tags: meta.BackupTags("b1")})
	if err != nil {
		t.Fatal(err)
	}
	rec := &meta.Record{
		ClusterInfo: &meta.ClusterInfo{Version: "7.5.0", FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: 1},
		TiKV:        meta.TiKV{Replicas: 1, Stores: []meta.TiKVStore{{ID: 1}}},
		Fedbr:       &meta.Extension{BackupID: "b1"},
	}
	for _, s := range snaps {
		rec.TiKV.Stores[0].Volumes = append(rec.TiKV.Stores[0].Volumes, meta.Volume{ID: s.VolumeID, SnapshotID: s.ID, Type: meta.DataDirType})
	}
	dir := t.TempDir()
	d, err := blob.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := meta.NewStore(d, nil)
	if err := store.PutBackupMeta(ctx, rec); err != nil {
		t.Fatal(err)
	}
	return fixture{url: hs.URL, dir: dir, srv: srv, store: store}
}

func run(t *testing.T, f fixture, extra ...string) (brclean.Summary, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := NewCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(append([]string{"--storage", f.dir, "--region", "us-west-2", "--aws-endpoint", f.url, "--delete-ratio", "2"}, extra...))
	err := cmd.ExecuteContext(context.Background())
	var sum brclean.Summary
	if jerr := json.Unmarshal(out.Bytes(), &sum); jerr != nil {
		t.Fatalf("summary is not JSON: %v\n%s", jerr, out.String())
	}
	return sum, errOut.String(), err
}

func TestCleanCommand(t *testing.T) {
	f := newFixture(t)
	sum, _, err := run(t, f, "--dry-run")
	if err != nil || sum.Result != "dry-run" || len(f.srv.Inventory(meta.BackupTags("b1")).Snapshots) != 2 {
		t.Fatalf("dry run: %+v, %v", sum, err)
	}
	sum, progress, err := run(t, f)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Result != "cleaned" || len(sum.Deleted) != 2 || !strings.Contains(progress, "Deleted snapshot") {
		t.Fatalf("summary = %+v, progress %q", sum, progress)
	}
	if inv := f.srv.Inventory(meta.BackupTags("b1")); len(inv.Snapshots) != 0 {
		t.Fatalf("left: %+v", inv)
	}
}

func TestCleanCommandMissingMetaFails(t *testing.T) {
	f := newFixture(t)
	if err := f.store.Blob().Delete(context.Background(), meta.BackupMetaKey); err != nil {
		t.Fatal(err)
	}
	sum, _, err := run(t, f, "--backup-id", "b1")
	if err == nil || sum.Result != "failed" || len(sum.Orphans) != 2 {
		t.Fatalf("summary = %+v, err %v", sum, err)
	}
	sum, _, err = run(t, f, "--backup-id", "b1", "--backup-outcome", "failed")
	if err != nil || sum.Result != "cleaned" {
		t.Fatalf("failed backup: summary = %+v, err %v", sum, err)
	}
}

// TestCleanCommandOnS3: the backup's metadata is in S3 (the double's), under a prefix.
func TestCleanCommandOnS3(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	if err := awsdouble.CreateBucket(ctx, f.url, "backups"); err != nil {
		t.Fatal(err)
	}
	rec, err := f.store.BackupMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s3 := session.Flags{Storage: "s3://backups/vbk-1/east", Region: "us-west-2", Endpoint: f.url}
	store, err := s3.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.PutBackupMeta(ctx, rec); err != nil {
		t.Fatal(err)
	}
	f.dir = s3.Storage
	sum, _, err := run(t, f)
	if err != nil || sum.Result != "cleaned" || len(sum.Deleted) != 2 || len(sum.Metadata) != 1 {
		t.Fatalf("summary = %+v, err %v", sum, err)
	}
	keys, err := store.Keys(ctx)
	if err != nil || len(keys) != 1 || keys[0] != meta.TombstoneKey {
		t.Fatalf("keys left in S3 = %v, %v", keys, err)
	}
}
