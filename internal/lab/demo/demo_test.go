package demo

import (
	"strings"
	"testing"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/lab/env"
)

// TestWarmupOptions: the lab runs the warm-up strategies its directory volumes can serve and
// refuses the others at once, saying why.
func TestWarmupOptions(t *testing.T) {
	lab := &env.Lab{DataPlanes: []env.DataPlane{{Cluster: "az1"}}}
	for _, tt := range []struct {
		name string
		o    Options
		want string
	}{
		{"sync, default strategy", Options{RestoreWarmup: fedv1alpha1.RestoreWarmupSync}, ""},
		{"check-wal-only", Options{RestoreWarmup: fedv1alpha1.RestoreWarmupSync, RestoreWarmupStrategy: fedv1alpha1.RestoreWarmupStrategyCheckWALOnly}, ""},
		{"hybrid, async", Options{RestoreWarmup: fedv1alpha1.RestoreWarmupAsync, RestoreWarmupStrategy: fedv1alpha1.RestoreWarmupStrategyHybrid}, ""},
		{"fio", Options{RestoreWarmup: fedv1alpha1.RestoreWarmupSync, RestoreWarmupStrategy: fedv1alpha1.RestoreWarmupStrategyFio}, ""},
		{"fio with raft volumes", Options{RestoreWarmup: fedv1alpha1.RestoreWarmupSync, RestoreWarmupStrategy: fedv1alpha1.RestoreWarmupStrategyFio, RaftVolumes: true}, ""},
		{"fsr", Options{RestoreWarmup: fedv1alpha1.RestoreWarmupSync, RestoreWarmupStrategy: fedv1alpha1.RestoreWarmupStrategyFsr}, `strategy "fsr" is not run in the lab`},
		{"a strategy without a mode", Options{RestoreWarmupStrategy: fedv1alpha1.RestoreWarmupStrategyCheckWALOnly}, "without a warm-up mode"},
		{"unknown strategy", Options{RestoreWarmup: fedv1alpha1.RestoreWarmupSync, RestoreWarmupStrategy: "dd"}, `"dd": want hybrid, fio or check-wal-only`},
		{"check-wal-only with raft volumes", Options{RestoreWarmup: fedv1alpha1.RestoreWarmupSync, RestoreWarmupStrategy: fedv1alpha1.RestoreWarmupStrategyCheckWALOnly, RaftVolumes: true}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.o.Lab = lab
			err := tt.o.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
