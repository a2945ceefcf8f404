package bank

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	labbank "github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

func run(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func TestDryRun(t *testing.T) {
	out, err := run(t, context.Background(), "run", "--dry-run", "--workers", "2")
	if err != nil || !strings.Contains(out, "would run 2 workers") {
		t.Fatalf("%q %v", out, err)
	}
	if _, err := run(t, context.Background(), "load", "--accounts", "1"); err == nil {
		t.Fatal("one account accepted")
	}
}

func TestLoadRunCheckAgainstCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3, SplitKeys: labbank.SplitKeys(40, 3),
		Tick: 20 * time.Millisecond, PD: pddouble.Config{OperatorRate: -1}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(t.TempDir(), "log.jsonl")
	common := []string{"--pd", c.PDAddr(), "--accounts", "40", "--log", logPath}
	// One more than the checker needs on each side: the log missing one transfer below the ts
	// (the last check) must still be judged, not refused.
	transfers := fmt.Sprint(labbank.MinTransfers + 1)
	for _, args := range [][]string{
		append([]string{"load"}, common...),
		append([]string{"run", "--transfers", transfers, "--workers", "2"}, common...),
	} {
		out, err := run(t, ctx, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args[0], err, out)
		}
		t.Logf("%s: %s", args[0], strings.TrimSpace(out))
	}
	// The ts to check: the last commit so far; every transfer of the next run commits above it.
	var ts uint64
	for _, x := range readTxns(t, logPath) {
		ts = max(ts, x.CommitTS)
	}
	if out, err := run(t, ctx, append([]string{"run", "--transfers", transfers, "--workers", "2"}, common...)...); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	// The cluster is live: it holds the state as of ts when read at ts.
	out, err := run(t, ctx, append([]string{"check", "--ts", fmt.Sprint(ts), "--read-ts", fmt.Sprint(ts)}, common...)...)
	if err != nil {
		t.Fatalf("check at %d: %v\n%s", ts, err, out)
	}
	t.Logf("check: %s", strings.TrimSpace(out))
	// At a ts before the load, the log holds nothing to judge: a refusal, not a pass.
	if out, err := run(t, ctx, append([]string{"check", "--ts", "1"}, common...)...); !errors.Is(err, labbank.ErrTooLittleData) {
		t.Fatalf("check before the load: %v, want a refusal\n%s", err, out)
	}
	// The checker can fail: a log without one transfer at or below the ts.
	txns := readTxns(t, logPath)
	for i, x := range txns {
		if x.From >= 0 && !x.Unknown && x.CommitTS <= ts {
			txns = append(txns[:i], txns[i+1:]...)
			break
		}
	}
	short := filepath.Join(t.TempDir(), "short.jsonl")
	if err := labbank.AppendLog(short, txns); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, ctx, "check", "--ts", fmt.Sprint(ts), "--read-ts", fmt.Sprint(ts), "--pd", c.PDAddr(), "--accounts", "40", "--log", short); !errors.Is(err, labbank.ErrMismatch) {
		t.Fatalf("check of a log missing a transfer: %v, want a mismatch\n%s", err, out)
	}
	if _, err := run(t, ctx, append([]string{"check"}, common...)...); err == nil {
		t.Fatal("check without --ts accepted")
	}
}

func readTxns(t *testing.T, path string) []labbank.Txn {
	t.Helper()
	txns, err := labbank.ReadLog(path)
	if err != nil {
		t.Fatal(err)
	}
	return txns
}
