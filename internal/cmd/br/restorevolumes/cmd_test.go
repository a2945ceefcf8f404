package restorevolumes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pd "github.com/tikv/pd/client"
	pdhttp "github.com/tikv/pd/client/http"

	brrestore "github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/br/snapshot"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/cloud/budget"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/tidb"
)

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func execute(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	cmd := NewCmd()
	cmd.SetArgs(args)
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	err = cmd.ExecuteContext(testContext(t))
	return out.String(), errb.String(), err
}

func TestBadFlags(t *testing.T) {
	dir := t.TempDir()
	base := []string{"-s", dir, "--restore-id", "r1", "--pd", "x:1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--restore-id", "r1", "--pd", "x:1"}, "--storage is required"},
		{[]string{"-s", dir, "--pd", "x:1"}, "--restore-id is required"},
		{[]string{"-s", dir, "--restore-id", "r1"}, "--pd is required"},
		{[]string{"-s", dir, "--restore-id", "r/1", "--pd", "x:1"}, "restore id"},
		{append(base, "--volume-type", "ssd"), "volume type"},
		{append(base, "--volume-type", "gp2", "--volume-iops", "3000"), "IOPS"},
		{append(base, "--volume-type", "io2", "--volume-throughput", "300"), "throughput"},
		{append(base, "--volume-iops", "-1"), "negative"},
		{append(base, "--kms-key-id", "alias/x"), "needs encryption"},
		{append(base, "--volume-encrypted", "--kms-key-id", "not a key"), "--kms-key-id"},
		{append(base, "--volume-scope", "some"), "volume scope"},
		{append(base, "--region", "us-west-2", "--target-az", "eu-west-1a"), "--target-az"},
		{append(base, "--tags", "fedbr.io/restore=x"), "--tags"},
		{append(base, "--tags", "AWS:Team=x"), "starts with aws:"},
		{append(base, "--tags", strings.Repeat("k", 128)+"=x"), "128 characters, at most 127"},
		{append(base, "--tags", "team="+strings.Repeat("v", 257)), "257 characters, at most 256"},
		{append(base, "--fsr-quota", "-1"), "FSR quota -1"},
		{append(base, "--owner", "uid/Not_A_Namespace"), "--owner"},
		{append(base, "--source-namespaces", ""), "--source-namespaces: no namespace"},
		{append(base, "--source-namespaces", "tidb,team-[a"), `--source-namespaces: namespace pattern "team-[a": not a glob`},
		{append(base, "--source-namespaces", "tidb,,ops"), "--source-namespaces: an empty namespace pattern"},
		{append(base, "--concurrency", "0"), "must be positive"},
		{append(base, "extra"), "unknown command"},
		{append(base, "--member", "-vb"), `--member "-vb" is not a valid object name`},
		{append(base, "--kubeconfig", "/k"), "need --member"},
	} {
		_, _, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err = %v, want %q", tc.args, err, tc.want)
		}
	}
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	cmd := NewCmd()
	for _, name := range []string{"storage", "region", "aws-endpoint", "restore-id", "pd", "target-az", "volume-type", "volume-iops",
		"volume-throughput", "volume-encrypted", "kms-key-id", "tags", "owner", "source-namespaces", "volume-scope", "use-fsr", "fsr-quota", "concurrency", "cleanup-timeout", "output-file",
		"member", "member-namespace", "kubeconfig"} {
		f := cmd.Flags().Lookup(name)
		if f == nil || f.Usage == "" {
			t.Errorf("flag --%s is missing or undocumented", name)
		}
	}
}

// futureTS is a TSO an hour ahead of PD's clock, so raising PD's TSO is observable.
func futureTS() uint64 {
	return uint64(time.Now().Add(time.Hour).UnixMilli()) << 18
}

type fixture struct {
	url   string
	srv   *awsdouble.Server
	dir   string
	store *meta.Store
	pd    *tidbcluster.Cluster
	ts    uint64
}

// newFixture serves the AWS double and a PD double, and takes a backup of two stores with
// the snapshot step.
func newFixture(t *testing.T) fixture {
	t.Helper()
	ctx := testContext(t)
	srv, err := awsdouble.Open(t.TempDir(), awsdouble.Options{VolumeCreateDuration: 5 * time.Millisecond})
	awsdoubletest.Credentials(t)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() {
		hs.Close()
		_ = srv.Close()
	})
	p, err := aws.New(ctx, aws.Config{Region: srv.Options().Region, Endpoint: hs.URL,
		Budget: budget.New(budget.ClientLimits(), nil), PollInterval: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{url: hs.URL, srv: srv, dir: t.TempDir(), ts: futureTS()}
	d, err := blob.NewDir(f.dir)
	if err != nil {
		t.Fatal(err)
	}
	f.store = meta.NewStore(d, nil)
	rec := &meta.Record{TiKV: meta.TiKV{Replicas: 2}}
	for i := range 2 {
		in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 10}, {Device: "/dev/xvdc", SizeGiB: 5}}})
		if err != nil {
			t.Fatal(err)
		}
		rec.TiKV.Stores = append(rec.TiKV.Stores, meta.TiKVStore{ID: uint64(i + 1), Volumes: []meta.Volume{
			{ID: in.Volumes[0].ID, Type: meta.DataDirType}, {ID: in.Volumes[1].ID, Type: "raft-engine.dir"}}})
	}
	if _, err := snapshot.Run(ctx, snapshot.Deps{Cloud: p, Store: f.store},
		snapshot.Options{BackupID: "bk", Input: rec, BackupTS: f.ts, SkipClusterCheck: true}); err != nil {
		t.Fatal(err)
	}
	f.pd = startPD(t, ctx)
	return f
}

// startPD starts a PD double (with three stores) for the test.
func startPD(t *testing.T, ctx context.Context) *tidbcluster.Cluster {
	t.Helper()
	c, err := tidbcluster.StartPD(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// marked reads PD's snapshot-recovering marker.
func marked(t *testing.T, pdURL string) bool {
	t.Helper()
	resp, err := http.Get(pdURL + "/pd/api/v1/admin/cluster/markers/snapshot-recovering")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var m struct{ Marked bool }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m.Marked
}

// tso reads a fresh timestamp from PD.
func tso(t *testing.T, addr string) uint64 {
	t.Helper()
	ctx := testContext(t)
	c, err := pd.NewClientWithContext(ctx, []string{addr}, pd.SecurityOption{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	physical, logical, err := c.GetTS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(physical)<<18 + uint64(logical)
}

// TestRestoreVolumes: PD is marked snapshot-recovering and its TSO raised past the backup's
// resolved ts, every volume is created in the target AZ with the requested options and the
// restore's tag, and restoremeta (and the output file) map old to new volumes.
func TestRestoreVolumes(t *testing.T) {
	f := newFixture(t)
	if marked(t, f.pd.PD.URL()) {
		t.Fatal("PD is marked before the restore")
	}
	output := filepath.Join(t.TempDir(), "restore.json")
	out, logs, err := execute(t, "-s", f.dir, "--aws-endpoint", f.url, "--region", "us-west-2", "--restore-id", "r1", "--pd", f.pd.PDAddr(),
		"--target-az", "us-west-2b", "--volume-type", "gp3", "--volume-iops", "4000", "--volume-throughput", "250",
		"--volume-encrypted", "--kms-key-id", "alias/fedbr", "--tags", "team=db", "--output-file", output)
	if err != nil {
		t.Fatalf("%v\n%s", err, logs)
	}
	if !marked(t, f.pd.PD.URL()) {
		t.Error("PD is not marked snapshot-recovering")
	}
	if got := tso(t, f.pd.PDAddr()); got < f.ts {
		t.Errorf("PD TSO %d is below the backup's resolved ts %d", got, f.ts)
	}
	var res brrestore.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	if len(res.Volumes) != 4 || res.ResolvedTS != f.ts {
		t.Fatalf("summary = %+v", res)
	}
	inv := f.srv.Inventory(meta.RestoreTags("r1")).Volumes
	if len(inv) != 4 {
		t.Fatalf("%d volumes tagged with the restore, want 4", len(inv))
	}
	for _, v := range inv {
		if v.Tags["team"] != "db" || v.Tags[brrestore.TagRestoredBy] != "new" {
			t.Errorf("volume %s tags = %v", v.ID, v.Tags)
		}
	}
	rm, err := f.store.RestoreMeta(testContext(t), "r1")
	if err != nil {
		t.Fatal(err)
	}
	m := rm.RestoredVolumes()
	for _, v := range res.Volumes {
		if m[v.BackupVolumeID] != v.VolumeID || v.AZ != "us-west-2b" {
			t.Errorf("volume %+v; restoremeta maps it to %q", v, m[v.BackupVolumeID])
		}
	}
	b, err := os.ReadFile(output)
	if err != nil {
		t.Fatal(err)
	}
	local, err := meta.Parse(b)
	if err != nil || len(local.RestoredVolumes()) != 4 {
		t.Fatalf("output file = %s, %v", b, err)
	}
}

// forbidReset answers 403 to reset-ts, as PD 6.2 and older do for a ts below theirs, and
// passes everything else to PD.
type forbidReset struct{ next http.RoundTripper }

func (f forbidReset) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/admin/reset-ts") {
		return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden", Body: io.NopCloser(strings.NewReader("smaller ts")),
			Header: http.Header{}, Request: r}, nil
	}
	return f.next.RoundTrip(r)
}

// TestResetTSForbiddenIsSuccess: the PD adapter accepts a 403 on reset-ts and reports other
// failures.
func TestResetTSForbiddenIsSuccess(t *testing.T) {
	ctx := testContext(t)
	c := startPD(t, ctx)
	hc := pdhttp.NewClient("fedbr-test", []string{c.PD.URL()}, pdhttp.WithHTTPClient(&http.Client{Transport: forbidReset{http.DefaultTransport}}))
	t.Cleanup(hc.Close)
	var log bytes.Buffer
	a := PD{Client: hc, Log: &log}
	if err := a.ResetTS(ctx, 5); err != nil {
		t.Fatalf("403: %v", err)
	}
	if !strings.Contains(log.String(), "403") {
		t.Errorf("log = %q", log.String())
	}
	if err := a.MarkSnapshotRecovering(ctx); err != nil || !marked(t, c.PD.URL()) {
		t.Fatalf("mark: %v", err)
	}

	plain := pdhttp.NewClient("fedbr-test", []string{c.PD.URL()})
	t.Cleanup(plain.Close)
	ts := futureTS()
	if err := (PD{Client: plain}).ResetTS(ctx, ts); err != nil {
		t.Fatal(err)
	}
	if got := tso(t, c.PDAddr()); got < ts {
		t.Errorf("TSO %d < %d", got, ts)
	}
}

// TestPendingBackupIsRefused: a backup whose snapshots have not all completed is no restore
// source; the command says so before touching PD or creating a volume.
func TestPendingBackupIsRefused(t *testing.T) {
	f := newFixture(t)
	ctx := testContext(t)
	rec, err := f.store.BackupMetaAsIs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rec.Fedbr.Snapshots = meta.SnapshotsPending
	b, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.store.Blob().Put(ctx, meta.BackupMetaKey, b); err != nil {
		t.Fatal(err)
	}
	_, _, err = execute(t, "-s", f.dir, "--aws-endpoint", f.url, "--restore-id", "r3", "--pd", f.pd.PDAddr())
	if err == nil || !strings.Contains(err.Error(), "have not all completed") {
		t.Fatalf("err = %v, want a not-completed error", err)
	}
	if marked(t, f.pd.PD.URL()) {
		t.Error("PD was marked for a backup that cannot be restored")
	}
	if n := len(f.srv.Inventory(meta.RestoreTags("r3")).Volumes); n != 0 {
		t.Errorf("%d volumes created", n)
	}
}

// TestLazyPDConnectsOnFirstUse: the PD client is created by the first call, not before the
// step runs (creating it waits for PD); a call whose context ends stops waiting for it, and
// once created it serves every call.
func TestLazyPDConnectsOnFirstUse(t *testing.T) {
	ctx := testContext(t)
	c := startPD(t, ctx)
	release := make(chan struct{})
	opened := 0
	l := newLazyPD(func() (pdhttp.Client, error) {
		opened++
		<-release // PD still starting
		return pdhttp.NewClient("fedbr-test", []string{c.PD.URL()}), nil
	}, nil)
	t.Cleanup(l.close)
	if opened != 0 {
		t.Fatal("the client was created before any call")
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := l.MarkSnapshotRecovering(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a call while PD starts: %v, want its context's end", err)
	}
	close(release)
	if err := l.MarkSnapshotRecovering(ctx); err != nil || !marked(t, c.PD.URL()) {
		t.Fatalf("mark once PD answers: %v", err)
	}
	ts := futureTS()
	if err := l.ResetTS(ctx, ts); err != nil || tso(t, c.PDAddr()) < ts || opened != 1 {
		t.Fatalf("reset: %v, client created %d times", err, opened)
	}
}

// TestLazyPDRetriesUntilPDAnswers: PD's HTTP client gives up on a PD that does not answer yet
// (tidb.ErrPDUnreachable, where it used to hand back nil and the step panicked); the lazy
// client tries again until PD answers, and a caller that stops waiting gets the last error.
func TestLazyPDRetriesUntilPDAnswers(t *testing.T) {
	ctx := testContext(t)
	c := startPD(t, ctx)
	defer func(d time.Duration) { lazyPDRetry = d }(lazyPDRetry)
	lazyPDRetry = 10 * time.Millisecond
	var tries atomic.Int32
	up := make(chan struct{})
	var client *tidb.TLS
	l := newLazyPD(func() (pdhttp.Client, error) {
		tries.Add(1)
		select {
		case <-up:
			return client.NewPDHTTPClient("fedbr-test", []string{c.PD.URL()})
		default:
			return nil, fmt.Errorf("%w: not yet", tidb.ErrPDUnreachable)
		}
	}, nil)
	t.Cleanup(l.close)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := l.MarkSnapshotRecovering(short); !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, tidb.ErrPDUnreachable) {
		t.Fatalf("a call while PD does not answer: %v, want its context's end and the last try's error", err)
	}
	close(up)
	if err := l.MarkSnapshotRecovering(ctx); err != nil || !marked(t, c.PD.URL()) {
		t.Fatalf("mark once PD answers: %v", err)
	}
	if n := tries.Load(); n < 2 {
		t.Errorf("%d tries, want the failed ones and the one that answered", n)
	}
}
