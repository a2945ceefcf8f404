package br

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pingcaplog "github.com/pingcap/log"
	"go.uber.org/zap/zapcore"
)

func TestLogLevel(t *testing.T) {
	tests := []struct {
		args    []string
		want    zapcore.Level
		wantErr string
	}{
		// size without --storage fails its own validation, after the level was set.
		{args: []string{"size"}, want: zapcore.WarnLevel, wantErr: "--storage is required"},
		{args: []string{"--log-level", "info", "size"}, want: zapcore.InfoLevel, wantErr: "--storage is required"},
		{args: []string{"--log-level", "error", "size"}, want: zapcore.ErrorLevel, wantErr: "--storage is required"},
		{args: []string{"--log-level", "loud", "size"}, want: zapcore.ErrorLevel, wantErr: `--log-level "loud": want debug, info, warn or error`},
	}
	defer pingcaplog.SetLevel(pingcaplog.GetLevel())
	for _, tc := range tests {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(tc.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%v: error = %v, want %q", tc.args, err, tc.wantErr)
		}
		if got := pingcaplog.GetLevel(); got != tc.want {
			t.Errorf("%v: library log level %s, want %s", tc.args, got, tc.want)
		}
	}
}

// TestSaveLog: with --save-log a step saves its own lines, its error last, as logs/<pod>.log
// under its storage, also when it fails; a step without a backup's storage refuses the flag.
func TestSaveLog(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("POD_NAME", "fed-b1-size-x7k2p")
	cmd := NewCmd()
	var stderr bytes.Buffer
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--save-log", "size", "--storage", dir, "--region", "us-west-2"})
	err := cmd.Execute()
	if err == nil || !strings.Contains(err.Error(), "backupmeta") {
		t.Fatalf("size of an empty storage: %v", err)
	}
	saved, rerr := os.ReadFile(filepath.Join(dir, "logs", "fed-b1-size-x7k2p.log"))
	if rerr != nil {
		t.Fatalf("no saved log: %v (stderr %s)", rerr, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(saved)), "\n")
	if !strings.HasSuffix(lines[0], "fedbr br size started") || !strings.Contains(lines[len(lines)-1], "Error: "+err.Error()) {
		t.Errorf("saved log:\n%s", saved)
	}
	if !strings.Contains(stderr.String(), "fedbr br size started") || !strings.Contains(stderr.String(), "Saving this log under "+dir) {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	for _, step := range []string{"clean", "pause"} {
		cmd := NewCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs([]string{"--save-log", step})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--save-log: "+step+" saves no log") {
			t.Errorf("%s with --save-log: %v", step, err)
		}
	}
}
