package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestMemberStorageSuffixesEveryProvider(t *testing.T) {
	tests := []struct {
		name   string
		in     StorageProvider
		prefix func(StorageProvider) string
		want   string
	}{
		{"s3", StorageProvider{S3: &S3StorageProvider{Provider: "aws", Prefix: "nightly"}}, func(s StorageProvider) string { return s.S3.Prefix }, "nightly-az1"},
		{"s3 empty prefix", StorageProvider{S3: &S3StorageProvider{Provider: "aws"}}, func(s StorageProvider) string { return s.S3.Prefix }, "az1"},
		{"gcs", StorageProvider{Gcs: &GcsStorageProvider{ProjectId: "p", Prefix: "b"}}, func(s StorageProvider) string { return s.Gcs.Prefix }, "b-az1"},
		{"azblob", StorageProvider{Azblob: &AzblobStorageProvider{Prefix: "c"}}, func(s StorageProvider) string { return s.Azblob.Prefix }, "c-az1"},
		{"local", StorageProvider{Local: &LocalStorageProvider{Prefix: "d"}}, func(s StorageProvider) string { return s.Local.Prefix }, "d-az1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := &VolumeBackupMemberSpec{StorageProvider: tc.in}
			got := tmpl.MemberStorage("az1")
			if p := tc.prefix(got); p != tc.want {
				t.Errorf("prefix = %q, want %q", p, tc.want)
			}
			// The template itself is not changed: every member derives from the same one.
			if tc.prefix(tmpl.StorageProvider) == tc.want {
				t.Errorf("MemberStorage modified the template")
			}
		})
	}
}

func TestEffectiveDefaults(t *testing.T) {
	var b VolumeBackupMemberSpec
	if b.EffectiveCleanPolicy() != CleanPolicyRetain || b.EffectiveCalcSizeLevel() != CalcSizeAll ||
		b.EffectiveInitJobDeadline() != 10*time.Minute || b.EffectiveSnapshotsDeleteRatio() != 1 ||
		b.EffectiveStepTimeout() != DefaultStepTimeout {
		t.Errorf("unexpected defaults: %v %v %v %v %v", b.EffectiveCleanPolicy(), b.EffectiveCalcSizeLevel(),
			b.EffectiveInitJobDeadline(), b.EffectiveSnapshotsDeleteRatio(), b.EffectiveStepTimeout())
	}
	b = VolumeBackupMemberSpec{
		CleanPolicy: CleanPolicyDelete, CalcSizeLevel: CalcSizeNone,
		VolumeBackupInitJobMaxActiveSeconds: ptr.To[int32](90), SnapshotsDeleteRatio: ptr.To(0.5),
		StepTimeout: &metav1.Duration{Duration: time.Hour},
	}
	if b.EffectiveCleanPolicy() != CleanPolicyDelete || b.EffectiveCalcSizeLevel() != CalcSizeNone ||
		b.EffectiveInitJobDeadline() != 90*time.Second || b.EffectiveSnapshotsDeleteRatio() != 0.5 ||
		b.EffectiveStepTimeout() != time.Hour {
		t.Errorf("set values not honoured")
	}
	var r VolumeRestoreMemberSpec
	if r.EffectiveWarmupStrategy() != RestoreWarmupStrategyHybrid || r.EffectiveStepTimeout() != DefaultStepTimeout {
		t.Errorf("unexpected restore defaults")
	}
}

// TestStepAndStallTimeouts: the ceiling fits a 16 TiB sync warm-up at gp3's 125 MiB/s (about
// 37 h), the stall window is the shorter, normal bound, and both honour a set value.
func TestStepAndStallTimeouts(t *testing.T) {
	warmup16TiB := time.Duration(16<<40/(125<<20)) * time.Second
	var b VolumeBackupMemberSpec
	var r VolumeRestoreMemberSpec
	for _, got := range []struct {
		name        string
		step, stall time.Duration
	}{{"backup", b.EffectiveStepTimeout(), b.EffectiveStallTimeout()}, {"restore", r.EffectiveStepTimeout(), r.EffectiveStallTimeout()}} {
		if got.step != 72*time.Hour || got.step < warmup16TiB {
			t.Errorf("%s: default stepTimeout %s, want 72h (a 16 TiB warm-up at 125 MiB/s takes %s)", got.name, got.step, warmup16TiB)
		}
		if got.stall != 6*time.Hour {
			t.Errorf("%s: default stallTimeout %s, want 6h", got.name, got.stall)
		}
	}
	b.StallTimeout, r.StallTimeout = &metav1.Duration{Duration: 30 * time.Minute}, &metav1.Duration{Duration: 12 * time.Hour}
	if b.EffectiveStallTimeout() != 30*time.Minute || r.EffectiveStallTimeout() != 12*time.Hour {
		t.Errorf("set stallTimeout not honoured: backup %s, restore %s", b.EffectiveStallTimeout(), r.EffectiveStallTimeout())
	}
}

func TestMemberNameAndStarted(t *testing.T) {
	if got := MemberName("nightly"); got != "fed-nightly" {
		t.Errorf("MemberName = %q", got)
	}
	b := &VolumeBackup{}
	if b.Started() {
		t.Error("new backup reports started")
	}
	now := metav1.Now()
	b.Status.TimeStarted = &now
	if !b.Started() {
		t.Error("backup with timeStarted reports not started")
	}
}

func TestWarmsUpBeforeTiKV(t *testing.T) {
	for _, tt := range []struct {
		mode     RestoreWarmupMode
		strategy RestoreWarmupStrategy
		want     bool
	}{
		{RestoreWarmupNone, "", false},
		{RestoreWarmupNone, RestoreWarmupStrategyCheckWALOnly, false}, // no warm-up asked for
		{RestoreWarmupSync, "", true},
		{RestoreWarmupAsync, "", false},
		{RestoreWarmupAsync, RestoreWarmupStrategyFio, false},
		{RestoreWarmupAsync, RestoreWarmupStrategyCheckWALOnly, true},
		{RestoreWarmupSync, RestoreWarmupStrategyCheckWALOnly, true},
	} {
		r := VolumeRestoreMemberSpec{Warmup: tt.mode, WarmupStrategy: tt.strategy}
		if got := r.WarmsUpBeforeTiKV(); got != tt.want {
			t.Errorf("warmup %q strategy %q: %v, want %v", tt.mode, tt.strategy, got, tt.want)
		}
	}
}
