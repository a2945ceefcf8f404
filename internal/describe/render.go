package describe

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/report"
)

// Render writes v for people; now dates the ages and the progress estimates.
func Render(w io.Writer, v *View, now time.Time) error {
	p := &printer{now: now}
	p.line(0, "%s %s/%s", v.Kind, v.Namespace, v.Name)
	p.line(1, "Phase: %s", orNone(v.Phase))
	p.fields(1, v.Fields)
	p.conditions(1, v.Conditions)
	if len(v.Backups) > 0 {
		p.line(1, "Backups (newest first):")
		tw := p.table(2, "NAME\tPHASE\tCREATED\tCOMMIT TS\tSIZE\tTIME TAKEN")
		for _, b := range v.Backups {
			row(tw, b.Name, orNone(b.Phase), p.age(b.Created), orDash(b.CommitTs), orDash(b.Size), orDash(b.TimeTaken))
		}
		p.flush(tw)
	}
	p.events(1, v.Events)
	for _, m := range v.Members {
		p.line(0, "")
		p.member(m)
	}
	_, err := io.WriteString(w, p.b.String())
	return err
}

type printer struct {
	b   strings.Builder
	now time.Time
}

func (p *printer) line(indent int, format string, args ...any) {
	p.b.WriteString(strings.Repeat("  ", indent))
	fmt.Fprintf(&p.b, format, args...)
	p.b.WriteByte('\n')
}

func (p *printer) fields(indent int, fs []Field) {
	for _, f := range fs {
		if f.Value != "" {
			p.line(indent, "%s: %s", f.Key, f.Value)
		}
	}
}

func (p *printer) conditions(indent int, cs []metav1.Condition) {
	if len(cs) == 0 {
		return
	}
	p.line(indent, "Conditions:")
	tw := p.table(indent+1, "TYPE\tSTATUS\tREASON\tAGE\tMESSAGE")
	for _, c := range cs {
		row(tw, c.Type, string(c.Status), orDash(c.Reason), p.age(c.LastTransitionTime.Time), oneLine(c.Message))
	}
	p.flush(tw)
}

func (p *printer) events(indent int, es []Event) {
	if len(es) == 0 {
		return
	}
	p.line(indent, "Events:")
	tw := p.table(indent+1, "AGE\tTYPE\tREASON\tOBJECT\tMESSAGE")
	for _, e := range es {
		reason := e.Reason
		if e.Count > 1 {
			reason = fmt.Sprintf("%s (x%d)", e.Reason, e.Count)
		}
		row(tw, p.age(e.Time), e.Type, reason, e.Object, oneLine(e.Message))
	}
	p.flush(tw)
}

func (p *printer) member(m Member) {
	p.line(0, "Member %s/%s in data plane %s", m.Namespace, m.Name, m.Plane)
	if m.Problem != "" {
		p.line(1, "%s", m.Problem)
		return
	}
	p.line(1, "Phase: %s", orNone(m.Phase))
	p.fields(1, m.Fields)
	for _, n := range m.Notes {
		p.line(1, "%s", n)
	}
	p.conditions(1, m.Conditions)
	if len(m.Steps) > 0 {
		p.line(1, "Steps:")
		for _, s := range m.Steps {
			p.line(2, "%s", p.step(s, m.Observed[s.Name]))
		}
	}
	if len(m.Jobs) > 0 {
		p.line(1, "Jobs:")
		for _, j := range m.Jobs {
			p.line(2, "%s (%s): %s", j.Name, j.Step, j.Status)
			for _, pod := range j.Pods {
				s := fmt.Sprintf("pod %s: %s", pod.Name, pod.Phase)
				if pod.Node != "" {
					s += " on " + pod.Node
				}
				if pod.Restarts > 0 {
					s += fmt.Sprintf(", %d restarts", pod.Restarts)
				}
				if pod.Exit != "" {
					s += ", " + pod.Exit
				}
				p.line(3, "%s", s)
			}
		}
	}
	p.events(1, m.Events)
}

// step is one step report on one line: phase, age, progress with an estimate, error.
func (p *printer) step(s dpv1alpha1.StepReport, obs []Observation) string {
	out := s.Name + ": " + orNone(s.Phase)
	if s.Since != nil {
		out += " for " + p.age(s.Since.Time)
	}
	if prog := Progress(s, obs, p.now); prog != "" {
		out += ", " + prog
	}
	if s.Error != "" {
		out += "; error: " + oneLine(s.Error)
	}
	return out
}

// Progress describes a long step's progress, or "" when the step reports none. The snapshot
// step shows the percent it reports and the time left at the rate between the observations
// obs of that percent (snapshotProgress, Estimate); the others — volumes created, bytes read,
// snapshots deleted — the time left at the rate since the step's phase began. A running step
// whose progress has not moved for a minute or more (its progressAt) says for how long: the
// agent fails it once that reaches stallTimeout.
func Progress(s dpv1alpha1.StepReport, obs []Observation, now time.Time) string {
	out := progress(s, obs, now)
	if out == "" || s.ProgressAt == nil || s.Phase == report.PhaseCompleted || s.Phase == report.PhaseFailed {
		return out
	}
	if still := now.Sub(s.ProgressAt.Time); still >= time.Minute {
		out += ", no progress for " + round(still).String()
	}
	return out
}

func progress(s dpv1alpha1.StepReport, obs []Observation, now time.Time) string {
	done, total := s.Done, s.Total
	unit := "done"
	switch {
	case estimated(s):
		return snapshotProgress(s, obs)
	case s.Name == dpv1alpha1.StepRestoreVolumes:
		unit = "volumes"
		if total == 0 && s.Volumes > 0 {
			total = int64(s.Volumes)
		}
	case s.Name == dpv1alpha1.StepClean:
		unit = "snapshots deleted"
		if s.Deleted > 0 {
			done = int64(s.Deleted)
		}
	case strings.HasPrefix(s.Name, dpv1alpha1.StepWarmup):
		unit = "bytes"
	}
	if total <= 0 {
		return ""
	}
	var out string
	if unit == "bytes" {
		out = fmt.Sprintf("%s of %s read", byteSize(done), byteSize(total))
	} else {
		out = fmt.Sprintf("%d/%d %s", done, total, unit)
	}
	out += fmt.Sprintf(" (%d%%)", done*100/total)
	if s.Phase == report.PhaseCompleted || s.Phase == report.PhaseFailed || done <= 0 || done >= total || s.Since == nil {
		return out
	}
	elapsed := now.Sub(s.Since.Time)
	if elapsed <= 0 {
		return out
	}
	left := time.Duration(float64(elapsed) * float64(total-done) / float64(done))
	return out + ", about " + round(left).String() + " left"
}

func byteSize(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String() + "B"
}

func (p *printer) table(indent int, header string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(&indentWriter{b: &p.b, prefix: strings.Repeat("  ", indent)}, 0, 0, 2, ' ', 0)
	row(tw, header)
	return tw
}

// row writes one table row; the table writes into a strings.Builder, which cannot fail.
func row(tw *tabwriter.Writer, cols ...string) {
	_, _ = io.WriteString(tw, strings.Join(cols, "\t")+"\n")
}

func (p *printer) flush(tw *tabwriter.Writer) { _ = tw.Flush() }

// age is how long ago t was, rounded for people; "-" for the zero time.
func (p *printer) age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := p.now.Sub(t)
	if d < 0 {
		d = 0
	}
	return round(d).String()
}

func round(d time.Duration) time.Duration {
	switch {
	case d >= time.Hour:
		return d.Round(time.Minute)
	case d >= time.Minute:
		return d.Round(time.Second)
	default:
		return d.Round(100 * time.Millisecond)
	}
}

// indentWriter prefixes every line a tabwriter emits.
type indentWriter struct {
	b      *strings.Builder
	prefix string
	mid    bool
}

func (w *indentWriter) Write(p []byte) (int, error) {
	for _, c := range p {
		if !w.mid {
			w.b.WriteString(w.prefix)
			w.mid = true
		}
		w.b.WriteByte(c)
		if c == '\n' {
			w.mid = false
		}
	}
	return len(p), nil
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
