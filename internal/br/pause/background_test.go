package pause

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBackground: Start returns once the pause holds GC at its backup ts; Holds is nil while it
// is Ready; Release lifts everything (no service safepoint left) and Holds then says the pause
// is no longer Ready.
func TestBackground(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	b, err := Start(ctx, e.deps(t), Config{TTL: 5 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if ts, sp := b.BackupTS(), e.minServiceSafePoint(t, ctx); ts == 0 || sp == 0 || sp > ts {
		t.Fatalf("backup ts %d, PD's lowest service safepoint %d: want the pause's pin at most at it", ts, sp)
	}
	if err := b.Holds(ctx, b.BackupTS()); err != nil {
		t.Fatalf("a Ready pause: %v", err)
	}
	b.Release()
	b.Release() // idempotent
	if sp := e.minServiceSafePoint(t, ctx); sp != 0 {
		t.Errorf("service safepoint %d left after the release", sp)
	}
	if err := b.Holds(ctx, b.BackupTS()); err == nil || !strings.Contains(err.Error(), "not Ready") {
		t.Errorf("a released pause: %v, want not Ready", err)
	}
}

// TestReadStatusFile: only a Ready status with a backup ts lets snapshots start; every other
// state says why.
func TestReadStatusFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body, want string
	}{
		{"ready", `{"phase":"Ready","backupTS":42}`, ""},
		{"not ready", `{"phase":"GCPaused","backupTS":42}`, "the pause is GCPaused, not Ready"},
		{"failed", `{"phase":"Failed","error":"a store died"}`, "(pause error: a store died)"},
		{"no ts", `{"phase":"Ready"}`, "Ready without a backupTS"},
		{"not JSON", `{`, "unexpected end of JSON input"},
	} {
		f := filepath.Join(dir, tc.name)
		if err := os.WriteFile(f, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := ReadStatusFile(f)
		switch {
		case tc.want == "" && (err != nil || st.BackupTS != 42):
			t.Errorf("%s: %+v, %v", tc.name, st, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := ReadStatusFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "read the pause status") {
		t.Errorf("a missing file: %v", err)
	}
}
