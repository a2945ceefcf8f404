package tikv

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/bank"
	"github.com/fedbr/fedbr/internal/lab/labtls"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/tidb"
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
func TestThreeStoresServeTransactions(t *testing.T) { threeStores(t, nil) }

// TestThreeStoresServeTransactionsOverTLS: the same with --ca, --cert and --key, against a PD
// double serving mutual TLS, committing with the lab's client certificate; a partial set is
// refused before the store serves.
func TestThreeStoresServeTransactionsOverTLS(t *testing.T) {
	set, err := labtls.New(filepath.Join(t.TempDir(), "client"))
	if err != nil {
		t.Fatal(err)
	}
	node := filepath.Join(t.TempDir(), "node")
	if err := set.WriteNode(node); err != nil {
		t.Fatal(err)
	}
	partial := NewCmd()
	partial.SetOut(&bytes.Buffer{})
	partial.SetErr(&bytes.Buffer{})
	partial.SetArgs([]string{"--store-id", "1", "--data-dir", t.TempDir(), "--dry-run", "--ca", filepath.Join(node, labtls.CAFile)})
	if err := partial.ExecuteContext(context.Background()); err == nil || !strings.Contains(err.Error(), "--ca, --cert and --key go together") {
		t.Fatalf("--ca alone: %v", err)
	}
	threeStores(t, set)
}

func threeStores(t *testing.T, set *labtls.Set) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pc := pddouble.Config{DataDir: t.TempDir(), OperatorRate: -1}
	var tlsArgs []string
	client := tidb.Plaintext
	if set != nil {
		pc.TLS = set.Node()
		node := filepath.Join(t.TempDir(), "node")
		if err := set.WriteNode(node); err != nil {
			t.Fatal(err)
		}
		tlsArgs = []string{"--ca", filepath.Join(node, labtls.CAFile), "--cert", filepath.Join(node, labtls.CertFile), "--key", filepath.Join(node, labtls.KeyFile)}
		if client, err = tidb.LoadTLS(set.Paths()); err != nil {
			t.Fatal(err)
		}
	}
	pd, err := pddouble.Start(ctx, pc, lis)
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
		cmd.SetArgs(append([]string{"--store-id", fmt.Sprint(id), "--data-dir", t.TempDir(), "--pd", pd.URL(), "--listen", "127.0.0.1:0",
			"--initial-stores", "1,2,3", "--split-keys", "m", "--tick", "20ms"}, tlsArgs...))
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
	cl, err := bank.NewClientTLS(ctx, []string{pd.Addr()}, client)
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
