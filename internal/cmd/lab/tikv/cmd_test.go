package tikv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
)

func TestDryRunAndBadFlags(t *testing.T) {
	cmd := NewCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--store-id", "1", "--data-dir", t.TempDir(), "--pd", "http://127.0.0.1:2379", "--initial-stores", "1,2,3", "--split-keys", "b,m", "--dry-run"})
	if err := cmd.ExecuteContext(context.Background()); err != nil || !strings.Contains(out.String(), "PD 127.0.0.1:2379, initial stores [1 2 3], 2 split keys") {
		t.Fatalf("dry run: %q %v", out.String(), err)
	}
	for _, args := range [][]string{
		{"--data-dir", "x"},
		{"--store-id", "0", "--data-dir", "x"},
		{"--store-id", "1", "--data-dir", "x", "--initial-stores", "1,2"},
		{"--store-id", "1", "--data-dir", "x", "--gc-poll-interval", "0s"},
	} {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(args)
		if err := cmd.ExecuteContext(context.Background()); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) { w <- string(p); return len(p), nil }

// TestThreeStoresServeTransactions runs three `lab tikv` commands against a
// PD double, as three lab pods would, and commits through them.
func TestThreeStoresServeTransactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pd, err := pddouble.Start(ctx, pddouble.Config{DataDir: t.TempDir(), OperatorRate: -1}, lis)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pd.Close() }()
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 3)
	started := 0
	defer func() {
		stop()
		for range started {
			if err := <-done; err != nil {
				t.Error(err)
			}
		}
	}()
	for id := 1; id <= 3; id++ {
		cmd := NewCmd()
		lines := make(lineWriter, 4)
		cmd.SetOut(lines)
		cmd.SetArgs([]string{"--store-id", fmt.Sprint(id), "--data-dir", t.TempDir(), "--pd", pd.URL(), "--listen", "127.0.0.1:0",
			"--initial-stores", "1,2,3", "--split-keys", "m", "--tick", "20ms"})
		go func() { done <- cmd.ExecuteContext(sctx) }()
		started++
		select {
		case l := <-lines:
			if !strings.Contains(l, "serving on 127.0.0.1:") {
				t.Fatalf("store %d: %q", id, l)
			}
		case <-ctx.Done():
			t.Fatalf("store %d did not start", id)
		}
	}
	cl, err := bank.NewClient(ctx, []string{pd.Addr()})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	start, _ := cl.TS(ctx)
	ts, err := cl.Commit(ctx, start, map[string][]byte{"a": []byte("1"), "z": []byte("2")})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cl.Get(ctx, []byte("z"), ts); err != nil || string(got) != "2" {
		t.Fatalf("z = %q, %v", got, err)
	}
}
