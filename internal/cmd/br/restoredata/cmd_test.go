package restoredata

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/fedbr/fedbr/internal/meta"
)

func TestRestoreDataFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, "--pd is required"},
		{[]string{"--pd", "pd:2379"}, "give --storage (to read the backupmeta) or --resolved-ts"},
		{[]string{"--pd", "pd:2379", "--resolved-ts", "1", "--attempts", "0"}, "--attempts and --concurrency >= 1"},
		{[]string{"--pd", "pd:2379", "--resolved-ts", "1", "--leader-timeout", "0s"}, "--backoff, --leader-timeout and --wait-stores-timeout positive"},
		{[]string{"--pd", "pd:2379", "--resolved-ts", "1", "--wait-stores-timeout", "0s"}, "--backoff, --leader-timeout and --wait-stores-timeout positive"},
		{[]string{"--pd", "pd:2379", "--resolved-ts", "1", "--timeout", "-1s"}, "--stores and --timeout must be >= 0"},
		{[]string{"--pd", "pd:2379", "--storage", "gs://bucket/x"}, "only s3:// and local directories"},
		{[]string{"--pd", "pd:2379", "--resolved-ts", "1", "--member", "vb/x"}, `--member "vb/x" is not a valid object name`},
		{[]string{"--pd", "pd:2379", "--resolved-ts", "1", "--member-namespace", "ns"}, "need --member"},
		{[]string{"--pd", "pd:2379", "--resolved-ts", "1", "--wait-start"}, "--wait-start watches --member"},
	}
	for _, tc := range tests {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: error = %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestStartSignal: the armed step's go is the member's phase restore-data, nothing before it.
func TestStartSignal(t *testing.T) {
	for phase, want := range map[string]bool{"restore-volume": false, "restore-data": true, "restore-finish": false, "": false} {
		m := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"phase": phase}}}
		if _, ok := startSignal(m); ok != want {
			t.Errorf("phase %q: go = %v, want %v", phase, ok, want)
		}
	}
}

// TestConfigCountsTheWholeCluster: the step waits for the whole cluster's TiKV stores, which the
// backupmeta records in tikv.replicas, not for this plane's store list; one fewer with
// --tolerate-single-tikv-outage; --stores overrides it.
func TestConfigCountsTheWholeCluster(t *testing.T) {
	plane := &meta.Record{ClusterInfo: &meta.ClusterInfo{ResolvedTS: 42},
		TiKV: meta.TiKV{Replicas: 6, Stores: []meta.TiKVStore{{ID: 1}, {ID: 4}}}}
	upstreamLike := &meta.Record{ClusterInfo: &meta.ClusterInfo{ResolvedTS: 42}, TiKV: meta.TiKV{Stores: []meta.TiKVStore{{ID: 1}, {ID: 4}}}}
	tests := []struct {
		name        string
		args        []string
		bm          *meta.Record
		wantStores  int
		wantMissing int
		wantTS      uint64
	}{
		{"backupmeta's tikv.replicas", nil, plane, 6, 0, 42},
		{"tolerating one store down", []string{"--tolerate-single-tikv-outage"}, plane, 6, 1, 42},
		{"--stores wins", []string{"--stores", "9", "--resolved-ts", "42"}, plane, 9, 0, 42},
		{"--resolved-ts without a backupmeta", []string{"--stores", "3", "--resolved-ts", "7"}, nil, 3, 0, 7},
		{"no replicas recorded: the stores listed", nil, upstreamLike, 2, 0, 42},
		{"no backupmeta", []string{"--stores", "3"}, nil, 3, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &options{}
			if err := newCmd(o).Flags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := o.config(tc.bm)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Stores != tc.wantStores || cfg.MaxMissingStores != tc.wantMissing || cfg.ResolvedTS != tc.wantTS {
				t.Errorf("config = stores %d, missing %d, ts %d; want %d, %d, %d", cfg.Stores, cfg.MaxMissingStores, cfg.ResolvedTS, tc.wantStores, tc.wantMissing, tc.wantTS)
			}
			if cfg.WaitStoresTimeout.Minutes() != 30 {
				t.Errorf("--wait-stores-timeout default = %s, want 30m", cfg.WaitStoresTimeout)
			}
		})
	}
}

// TestResolvedTSMustMatchTheBackupmeta: the ts the manager decided (the member's
// spec.resolvedTS, passed as --resolved-ts) and the one the backupmeta it reads gives must be
// the same, or restore-data refuses before it touches the cluster: the backupmeta changed since
// restore-volumes reported it, or the decision was made from something else.
func TestResolvedTSMustMatchTheBackupmeta(t *testing.T) {
	o := &options{}
	if err := newCmd(o).Flags().Parse([]string{"--resolved-ts", "41"}); err != nil {
		t.Fatal(err)
	}
	_, err := o.config(&meta.Record{ClusterInfo: &meta.ClusterInfo{ResolvedTS: 42}, TiKV: meta.TiKV{Replicas: 3}})
	if !errors.Is(err, ErrResolvedTSMismatch) || !strings.Contains(err.Error(), "--resolved-ts 41") || !strings.Contains(err.Error(), "resolved ts 42") {
		t.Fatalf("config with --resolved-ts 41 over a backupmeta at 42 = %v, want ErrResolvedTSMismatch naming both", err)
	}
}

// TestTimeoutCountsFromTheGo: the armed wait runs without --timeout's deadline (an armed step
// may wait for hours while other planes warm up), and the work's deadline is --timeout from
// the go, not from the step's start.
func TestTimeoutCountsFromTheGo(t *testing.T) {
	var wentAt time.Time
	ctx, cancel, err := afterGo(context.Background(), time.Hour, func(ctx context.Context) error {
		if d, ok := ctx.Deadline(); ok {
			t.Errorf("the armed wait has a deadline (%s): --timeout would count the wait", d)
		}
		wentAt = time.Now()
		return nil
	})
	defer cancel()
	if err != nil {
		t.Fatal(err)
	}
	d, ok := ctx.Deadline()
	if !ok || d.Before(wentAt.Add(time.Hour)) {
		t.Errorf("work deadline %v (set %v), want at least the go %s + 1h", d, ok, wentAt)
	}

	// No --timeout (the agent passes none): the work has no deadline of its own.
	ctx0, cancel0, err := afterGo(context.Background(), 0, func(context.Context) error { return nil })
	defer cancel0()
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := ctx0.Deadline(); ok {
		t.Errorf("without --timeout the work has a deadline (%s)", d)
	}

	boom := errors.New("member gone")
	if _, _, err := afterGo(context.Background(), time.Hour, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("err = %v, want the wait's error", err)
	}
}
