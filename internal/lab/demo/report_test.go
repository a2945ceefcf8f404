package demo

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/testenv"
)

func TestOverhead(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	step := func(from, to float64) Step { return Step{Start: at(from), End: at(to)} }
	for _, tt := range []struct {
		name string
		wall time.Duration
		work []Step
		want time.Duration
		ok   bool
	}{
		{name: "disjoint work is subtracted whole", wall: 10 * time.Second, work: []Step{step(1, 3), step(5, 6)}, want: 7 * time.Second, ok: true},
		{name: "overlapping work counts once", wall: 10 * time.Second, work: []Step{step(4, 6), step(1, 5)}, want: 5 * time.Second, ok: true},
		{name: "work inside other work counts once", wall: 10 * time.Second, work: []Step{step(1, 8), step(2, 3)}, want: 3 * time.Second, ok: true},
		{name: "a missing end is no measurement", wall: 10 * time.Second, work: []Step{step(1, 3), {Start: at(4)}}},
		{name: "a missing start is no measurement", wall: 10 * time.Second, work: []Step{{End: at(4)}}},
		{name: "no wall time", work: []Step{step(1, 3)}},
		{name: "no work", wall: time.Second},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := overhead(tt.wall, tt.work)
			if ok != tt.ok || got != tt.want {
				t.Errorf("overhead = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

// TestHeadlineFirst: the report opens with the verdict and the numbers a user judges fedbr by,
// keeps the project's instrumentation out unless asked, and ends with the verdict again.
func TestHeadlineFirst(t *testing.T) {
	r := &Report{
		Backup:      &fedv1alpha1.VolumeBackup{Status: fedv1alpha1.VolumeBackupStatus{CommitTs: "470967885383598080"}},
		BackupWall:  8300 * time.Millisecond,
		RestoreWall: 12100 * time.Millisecond,
		GCPause:     800 * time.Millisecond,
		Snapshots:   9, Warmup: "WarmedUp", WarmupJobs: 9, WarmupJobsTotal: 9,
		Checker: "pass", TxnsBeforeCommitTS: 1234, TxnsAfterCommitTS: 100,
		PauseBreakdown: []Step{{Name: "pause taking hold", Start: time.Unix(0, 0), End: time.Unix(1, 0)}},
		backupMembers:  []memberRef{{cluster: "dp1"}, {cluster: "dp2"}, {cluster: "dp3"}},
	}
	var b strings.Builder
	r.Print(&b, PrintOptions{})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"RESULT: PASS: one TiDB cluster over 3 data planes backed up while a bank workload wrote, restored into fresh clusters, checked",
		"  backup   8.3s: 9 EBS snapshots consistent at commit ts 470967885383598080; GC and PD scheduling held 800ms",
		"  restore  12.1s into fresh TidbClusters in every plane, warm-up WarmedUp (9 of 9 Jobs)",
		"  data     exact: the 1234 transfers committed at or before the commit ts, none of the 100 after it",
		"  cleanup  the source's GC and PD scheduling lifted; deleting the backup left 0 snapshots, 0 volumes",
	}
	if len(lines) < len(want) || !slices.Equal(lines[:len(want)], want) {
		t.Fatalf("headline:\n%s\nwant:\n%s", strings.Join(lines[:min(len(lines), len(want))], "\n"), strings.Join(want, "\n"))
	}
	if last := lines[len(lines)-1]; last != "RESULT: PASS" {
		t.Errorf("last line %q, want the verdict again", last)
	}
	if strings.Contains(b.String(), "pause taking hold") {
		t.Errorf("the pause breakdown is printed without PrintOptions.Instrumentation:\n%s", b.String())
	}
	b.Reset()
	r.Print(&b, PrintOptions{Instrumentation: true})
	if !strings.Contains(b.String(), "pause taking hold") {
		t.Errorf("the pause breakdown is missing with PrintOptions.Instrumentation:\n%s", b.String())
	}

	r.Err, r.Checker = errors.New("transfer 17 missing"), "transfer 17 missing"
	b.Reset()
	r.Headline(&b)
	for _, w := range []string{"RESULT: FAIL: transfer 17 missing:", "  data     WRONG: transfer 17 missing"} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("failed headline lacks %q:\n%s", w, b.String())
		}
	}
}

// TestLayoutInDocs: docs/federation.md shows the picture the demo prints, verbatim.
func TestLayoutInDocs(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "federation.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "```text\n"+Layout+"```\n") {
		t.Errorf("docs/federation.md does not carry demo.Layout verbatim in a text block: copy it from internal/lab/demo/layout.go")
	}
}
