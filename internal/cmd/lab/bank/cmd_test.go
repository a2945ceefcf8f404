package bank

import (
	"bytes"
	"context"
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
	common := []string{"--pd", c.PDAddr(), "--accounts", "40", "--log", filepath.Join(t.TempDir(), "log.jsonl")}
	for _, args := range [][]string{
		append([]string{"load"}, common...),
		append([]string{"run", "--duration", "300ms", "--workers", "2"}, common...),
		append([]string{"check"}, common...),
	} {
		out, err := run(t, ctx, args...)
		if err != nil {
			t.Fatalf("%v: %v\n%s", args[0], err, out)
		}
		t.Logf("%s: %s", args[0], strings.TrimSpace(out))
	}
	// A check at a ts before the load must fail: the checker can fail.
	if out, err := run(t, ctx, append([]string{"check", "--ts", "1"}, common...)...); err == nil {
		t.Fatalf("check before the load passed: %s", out)
	}
}
