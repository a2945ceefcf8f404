package br

import (
	"bytes"
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
