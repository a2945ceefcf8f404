package demo

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

// describe runs `fedbr describe` and `fedbr logs` on the demo's backup and restore as an SRE
// would — the shipped commands, with the lab's kubeconfig for the control plane and as the data
// planes' kubeconfig (the manager's) — prints what they print and keeps it in the report.
func (d *Harness) describe(ctx context.Context, b *fedv1alpha1.VolumeBackup, r *fedv1alpha1.VolumeRestore) error {
	d.report.Described = map[string]string{}
	for _, c := range []struct {
		key  string
		args []string
	}{
		{"describe backup", []string{"describe", "backup", b.Name}},
		{"logs backup", []string{"logs", "backup", b.Name, "--step", dpv1alpha1.StepSnapshot, "--tail", "2"}},
		{"describe restore", []string{"describe", "restore", r.Name}},
	} {
		out, err := d.cli(ctx, c.args...)
		if err != nil {
			return fmt.Errorf("fedbr %s: %w\n%s", strings.Join(c.args, " "), err, out)
		}
		d.report.Described[c.key] = out
		d.Say("$ fedbr %s\n%s", strings.Join(c.args, " "), indent(out, "    "))
	}
	return nil
}

// cli runs the fedbr binary with args against the lab, the control plane's namespace of the
// demo's operations selected.
func (d *Harness) cli(ctx context.Context, args ...string) (string, error) {
	kc := d.lab.Kubeconfig
	args = append(args, "-n", ControlNamespace, "--kubeconfig", kc, "--context", d.lab.Control, "--planes-kubeconfig", kc)
	cmd := exec.CommandContext(ctx, d.o.Fedbr, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}
