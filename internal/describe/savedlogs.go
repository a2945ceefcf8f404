package describe

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/meta"
)

// OpenStore opens the backup metadata at storage (a step's --storage value, s3://BUCKET/PREFIX)
// with the caller's own credentials.
type OpenStore func(ctx context.Context, storage string) (*meta.Store, error)

// savedLogSteps are the steps that save their logs, per kind (the agent's --save-step-logs).
var savedLogSteps = map[string][]string{
	"backup":  {job.StepSnapshot, job.StepSize},
	"restore": {job.StepRestoreVolumes, job.StepRestoreData},
}

// SavedLogs writes the logs the steps of a VolumeBackup ("backup") or VolumeRestore
// ("restore") saved under the backup's storage in each data plane (`logs/<pod>.log`, the
// agent's --save-step-logs), each under a header naming its plane, pod and where it was read:
// what `fedbr logs --saved` prints once the step pods are gone with their Jobs. A restore's
// steps save theirs under the backup they restore. What is read is untrusted: control
// characters other than tab and newline are printed as '?', so a log cannot drive the terminal.
func (s *Source) SavedLogs(ctx context.Context, out io.Writer, kind, namespace, name string, o LogOptions, open OpenStore) error {
	steps, ok := savedLogSteps[kind]
	if !ok {
		return fmt.Errorf("logs of %q: want backup or restore", kind)
	}
	if o.Step != "" {
		if !slices.Contains(steps, o.Step) {
			return fmt.Errorf("the %s step saves no log: the %ss' steps that do are %s", o.Step, kind, strings.Join(steps, ", "))
		}
		steps = []string{o.Step}
	}
	targets, err := s.targets(ctx, kind, namespace, name)
	if err != nil {
		return err
	}
	w := &errWriter{w: out}
	found := false
	for _, t := range targets {
		if o.Plane != "" && t.plane != o.Plane {
			continue
		}
		found = true
		if err := savedPlaneLogs(ctx, w, t, steps, open); err != nil {
			w.printf("==> %s: %v <==\n", t.plane, err)
		}
	}
	if !found {
		return fmt.Errorf("%s %s/%s has no member in data plane %q", kind, namespace, name, o.Plane)
	}
	return w.err
}

func storageFlag(sp fedv1alpha1.StorageProvider) string {
	st, err := job.StorageFor(sp)
	if err != nil {
		return ""
	}
	return st.Flag
}

func savedPlaneLogs(ctx context.Context, w *errWriter, t target, steps []string, open OpenStore) error {
	if !strings.HasPrefix(t.storage, "s3://") {
		return fmt.Errorf("the steps save their logs in S3 storage only; this member's storage is %q", t.storage)
	}
	store, err := open(ctx, t.storage)
	if err != nil {
		return fmt.Errorf("open %s: %w", t.storage, err)
	}
	pods, err := store.StepLogs(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", t.storage, err)
	}
	n := 0
	for _, pod := range pods {
		if !podOfSteps(pod, t.member, steps) {
			continue
		}
		n++
		w.printf("==> %s/%s (saved in %s) <==\n", t.plane, pod, t.storage)
		b, err := store.StepLog(ctx, pod)
		if err != nil {
			w.printf("(not readable: %v)\n", err)
			continue
		}
		w.printf("%s", printable(b))
		if len(b) > 0 && b[len(b)-1] != '\n' {
			w.printf("\n")
		}
	}
	if n == 0 {
		w.printf("==> %s: no saved logs of %s's %s under %s (the agent saves them with --save-step-logs) <==\n",
			t.plane, t.member, strings.Join(steps, ", "), t.storage)
	}
	return nil
}

// podOfSteps says pod is one of member's Jobs of steps: its name begins with the Job's name
// (cut as the Job controller cuts a pod's generated name, to 58 characters) and a dash.
func podOfSteps(pod, member string, steps []string) bool {
	for _, st := range steps {
		prefix := job.Name(member, st) + "-"
		if len(prefix) > 58 {
			prefix = prefix[:58]
		}
		if strings.HasPrefix(pod, prefix) {
			return true
		}
	}
	return false
}

// printable is b with every control character but tab and newline shown as '?'.
func printable(b []byte) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' || (r >= 0x20 && r != 0x7f && (r < 0x80 || r > 0x9f)) {
			return r
		}
		return '?'
	}, string(b))
}
