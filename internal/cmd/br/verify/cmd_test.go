package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/br/verify"
	"github.com/fedbr/fedbr/internal/lab/tidbcluster"
	"github.com/fedbr/fedbr/internal/testenv"
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

// TestVerifyReportsToItsMember: with --member the step writes its status.steps entry "verify" in
// a VolumeRestoreMember through a real API server: the result of a pass, the failed checks of a
// failure, which is what the agent turns into the member's Checked.
func TestVerifyReportsToItsMember(t *testing.T) {
	env := testenv.Start(t) // skips in -short mode
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := tidbcluster.Start(ctx, tidbcluster.Config{Dir: t.TempDir(), Stores: 3, Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		name, stores, wait, phase, errText string
	}{
		{"pass", "3", "1m", report.PhaseCompleted, ""},
		{"fail", "4", "0s", report.PhaseFailed, "every TiKV store is Up, 4 of them: PD lists 3 TiKV stores, the backup had 4"},
	} {
		m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: metav1.ObjectMeta{Name: "fed-" + tc.name, Namespace: "default"},
			Spec: dpv1alpha1.VolumeRestoreMemberSpec{VolumeRestore: tc.name, K8sClusterName: "dp1", TCName: "basic", TCNamespace: "default",
				Phase: dpv1alpha1.RestoreMemberRestoreFinish, Backup: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "bk", Prefix: "p"}}}}
		if err := env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		cmd := NewCmd()
		var errOut bytes.Buffer
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&errOut)
		cmd.SetArgs([]string{"--pd", c.PDAddr(), "--interval", "50ms", "--wait", tc.wait, "--stores", tc.stores,
			"--member", m.Name, "--member-namespace", "default", "--kubeconfig", env.Kubeconfig})
		err := cmd.ExecuteContext(ctx)
		if (err == nil) != (tc.errText == "") {
			t.Fatalf("%s: %v\n%s", tc.name, err, errOut.String())
		}
		got := &dpv1alpha1.VolumeRestoreMember{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
			t.Fatal(err)
		}
		st, ok := dpv1alpha1.Step(got.Status.Steps, "verify")
		if !ok || st.Phase != tc.phase || !strings.Contains(st.Error, tc.errText) {
			t.Fatalf("%s: verify report %+v, want phase %s and error %q", tc.name, st, tc.phase, tc.errText)
		}
		if tc.errText != "" {
			continue
		}
		var r verify.Result
		if st.Result == nil || json.Unmarshal(st.Result.Raw, &r) != nil || !r.Passed || r.Stores != 3 || len(r.Checks) == 0 {
			t.Errorf("pass: result %v, want the passed checks over 3 stores", st.Result)
		}
	}
}
