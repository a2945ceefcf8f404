package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/verify"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
)

func TestVerifyFlags(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		wantErr string
	}{
		{nil, "--pd"},
		{[]string{"--pd", "127.0.0.1:2379", "--stores", "-1"}, "--stores must be 0 or more"},
		{[]string{"--pd", "127.0.0.1:2379", "--interval", "0s"}, "--interval positive"},
		{[]string{"--pd", "127.0.0.1:2379", "--ca", "/nonexistent/ca.crt"}, "--ca"},
	} {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: error = %v, want %q", tc.args, err, tc.wantErr)
		}
	}
}

// TestVerifyCommand: a healthy cluster passes (exit 0, the JSON result passed, a line per
// check); told the backup had more stores, it fails with that check's line and ErrFailed.
func TestVerifyCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3, Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	run := func(args ...string) (verify.Result, string, error) {
		cmd := NewCmd()
		var out, errOut bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		cmd.SetArgs(append([]string{"--pd", c.PDAddr(), "--interval", "50ms"}, args...))
		err := cmd.ExecuteContext(ctx)
		var r verify.Result
		if jerr := json.Unmarshal(out.Bytes(), &r); jerr != nil {
			t.Fatalf("%v: stdout is no result: %v\n%s\n%s", args, jerr, out.String(), errOut.String())
		}
		return r, errOut.String(), err
	}
	r, log, err := run("--stores", "3", "--wait", "1m")
	if err != nil || !r.Passed || r.Stores != 3 || !strings.Contains(log, "ok    every TiKV store is Up, 3 of them") {
		t.Fatalf("healthy cluster: %v, %+v\n%s", err, r, log)
	}
	r, log, err = run("--stores", "4", "--wait", "0s")
	want := "FAIL  every TiKV store is Up, 4 of them: PD lists 3 TiKV stores, the backup had 4"
	if !errors.Is(err, ErrFailed) || r.Passed || !strings.Contains(log, want) {
		t.Fatalf("4 stores wanted: %v, %+v; want %q in\n%s", err, r, want, log)
	}
}
