package size

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	brsize "github.com/fedbr/fedbr/internal/br/size"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
	"github.com/fedbr/fedbr/internal/meta"
)

func TestBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "--storage is required"},
		{[]string{"-s", "/tmp/x", "--level", "incremental"}, "--level"},
		{[]string{"-s", "/tmp/x", "--previous-storage", "gs://x"}, "--previous-storage"},
		{[]string{"-s", "/tmp/x", "--previous-storage", "/tmp/y", "--level", "full"}, "only used with --level all"},
	} {
		cmd := NewCmd()
		cmd.SetArgs(tc.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
	for _, name := range []string{"storage", "region", "aws-endpoint", "previous-storage", "level", "dry-run", "member"} {
		if f := NewCmd().Flags().Lookup(name); f == nil || f.Usage == "" {
			t.Errorf("flag --%s is missing or undocumented", name)
		}
	}
}

// TestSizeCommand sizes a one-volume backup of 3 written blocks against the AWS double.
func TestSizeCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, err := awsdouble.Open(t.TempDir(), awsdouble.Options{})
	awsdoubletest.Credentials(t)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	defer func() {
		hs.Close()
		_ = srv.Close()
	}()
	p, err := aws.New(ctx, aws.Config{Region: "us-west-2", Endpoint: hs.URL, Budget: budget.New(budget.ClientLimits(), nil), PollInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3*awsdouble.BlockSize)
	_, _ = rand.Read(data)
	if err := volumelock.NewWriter(in.Volumes[0].Dir).Append("x", data); err != nil {
		t.Fatal(err)
	}
	snaps, err := p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitSnapshots(ctx, []string{snaps[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	d, _ := blob.NewDir(dir)
	rec := &meta.Record{ClusterInfo: &meta.ClusterInfo{Version: "7.5.0", FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: 7},
		TiKV: meta.TiKV{Replicas: 1, Stores: []meta.TiKVStore{{ID: 1, Volumes: []meta.Volume{{ID: in.Volumes[0].ID, SnapshotID: snaps[0].ID, Type: meta.DataDirType}}}}}}
	if err := meta.NewStore(d, nil).PutBackupMeta(ctx, rec); err != nil {
		t.Fatal(err)
	}

	var out, progress bytes.Buffer
	cmd := NewCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&progress)
	cmd.SetArgs([]string{"-s", dir, "--region", "us-west-2", "--aws-endpoint", hs.URL})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	var sum brsize.Summary
	if err := json.Unmarshal(out.Bytes(), &sum); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	if sum.FullBytes != 3*awsdouble.BlockSize || sum.IncrementalBytes != sum.FullBytes || len(sum.Volumes) != 1 {
		t.Fatalf("summary = %+v", sum)
	}
	if !strings.Contains(progress.String(), "Backup size") {
		t.Fatalf("progress = %q", progress.String())
	}
}
