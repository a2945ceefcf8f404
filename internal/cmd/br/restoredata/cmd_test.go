package restoredata

import (
	"bytes"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRestoreDataFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, "--pd is required"},
		{[]string{"--pd", "pd:2379"}, "give --storage (to read the backupmeta) or --resolved-ts"},
		{[]string{"--pd", "pd:2379", "--resolved-ts", "1", "--attempts", "0"}, "--attempts and --concurrency >= 1"},
		{[]string{"--pd", "pd:2379", "--resolved-ts", "1", "--leader-timeout", "0s"}, "--leader-timeout and --timeout positive"},
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
