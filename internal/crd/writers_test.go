package crd_test

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestEveryStatusFieldHasAWriter: docs/federation.md's "Who writes what" names, for every status
// field of fedbr's five kinds, its one writer and where its value comes from; a field added to an
// API without a row there (or a row naming a field the API lacks) fails here.
func TestEveryStatusFieldHasAWriter(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "federation.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Who writes what\n")
	if !ok {
		t.Fatal(`docs/federation.md has no section "Who writes what"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	documented := map[string]bool{}
	field := regexp.MustCompile("`([a-zA-Z]+)`")
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 5 || strings.TrimSpace(cells[1]) == "object" || strings.HasPrefix(strings.TrimSpace(cells[1]), "-") {
			continue
		}
		kind, writer := strings.TrimSpace(cells[1]), strings.TrimSpace(cells[3])
		if writer == "" || strings.TrimSpace(cells[4]) == "" {
			t.Errorf("row %q names no writer or no source", line)
		}
		for _, m := range field.FindAllStringSubmatch(cells[2], -1) {
			documented[kind+"."+m[1]] = true
		}
	}
	want := map[string]bool{}
	for kind, status := range map[string]any{
		"VolumeBackup": fedv1alpha1.VolumeBackupStatus{}, "VolumeRestore": fedv1alpha1.VolumeRestoreStatus{},
		"VolumeBackupSchedule": fedv1alpha1.VolumeBackupScheduleStatus{},
		"VolumeBackupMember":   dpv1alpha1.VolumeBackupMemberStatus{}, "VolumeRestoreMember": dpv1alpha1.VolumeRestoreMemberStatus{},
	} {
		ty := reflect.TypeOf(status)
		for i := range ty.NumField() {
			name, _, _ := strings.Cut(ty.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				t.Fatalf("%s.%s has no JSON name", kind, ty.Field(i).Name)
			}
			want[kind+"."+name] = true
			if !documented[kind+"."+name] {
				t.Errorf("status field %s.%s has no writer in docs/federation.md's \"Who writes what\"", kind, name)
			}
		}
	}
	for f := range documented {
		if !want[f] {
			t.Errorf("docs/federation.md's \"Who writes what\" names %s, which the API does not have", f)
		}
	}
	if len(want) < 40 {
		t.Fatalf("read only %d status fields: the API's status types are not what this test thinks", len(want))
	}
}
