package v1alpha1

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

var (
	cronRE          = regexp.MustCompile(CronPattern)
	retentionRE     = regexp.MustCompile(RetentionPattern)
	zeroRetentionRE = regexp.MustCompile(zeroRetentionPattern)
	// retentionTermRE splits a retention into number+unit terms.
	retentionTermRE = regexp.MustCompile(`([0-9]+(?:[.][0-9]+)?)(ns|us|µs|ms|s|m|h|d)`)
)

// ParseSchedule parses a schedule the way the controller runs it. It is stricter than
// admission, which cannot see reversed ranges such as 10-5.
func ParseSchedule(schedule string) (cron.Schedule, error) {
	if !cronRE.MatchString(schedule) {
		return nil, fmt.Errorf("schedule %q is not a 5-field cron expression or @descriptor", schedule)
	}
	s, err := cron.ParseStandard(strings.TrimSpace(schedule))
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	return s, nil
}

// ParseRetention parses maxReservedTime: a Go duration, or one with a day unit (7d, 1d12h).
// Upstream accepted only Go durations although its design showed 7d.
func ParseRetention(s string) (time.Duration, error) {
	if !retentionRE.MatchString(s) {
		return 0, fmt.Errorf("retention %q is not a duration such as 168h or 7d", s)
	}
	if zeroRetentionRE.MatchString(s) {
		return 0, fmt.Errorf("retention %q must be longer than zero", s)
	}
	var total time.Duration
	for _, term := range retentionTermRE.FindAllStringSubmatch(s, -1) {
		if term[2] != "d" {
			d, err := time.ParseDuration(term[0])
			if err != nil {
				return 0, fmt.Errorf("retention %q: %w", s, err)
			}
			total += d
			continue
		}
		days, err := strconv.ParseFloat(term[1], 64)
		if err != nil {
			return 0, fmt.Errorf("retention %q: %w", s, err)
		}
		total += time.Duration(days * float64(24*time.Hour))
	}
	return total, nil
}

// HasRetention says retention deletes backups: maxReservedTime is set, or maxBackups above 0.
func (s *VolumeBackupScheduleSpec) HasRetention() bool {
	return s.MaxReservedTime != nil || s.MaxBackups != nil && *s.MaxBackups > 0
}

// BackupCleanPolicy is the cleanPolicy the schedule writes into each VolumeBackup it creates:
// the template's when it sets one; Delete when it does not and the schedule has retention, so
// the backups retention deletes take their snapshots and metadata with them (upstream left it
// unset, and Retain kept them for ever); unset otherwise (the VolumeBackup default, Retain).
func (s *VolumeBackupScheduleSpec) BackupCleanPolicy() CleanPolicyType {
	if p := s.BackupTemplate.Template.CleanPolicy; p != "" || !s.HasRetention() {
		return p
	}
	return CleanPolicyDelete
}
