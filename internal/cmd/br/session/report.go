package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	"github.com/fedbr/fedbr/internal/br/report"
	"github.com/fedbr/fedbr/internal/podenv"
	"github.com/fedbr/fedbr/internal/restconfig"
)

// ReportFlags point a step at the member it runs for: the step reports itself in the member's
// status.steps (its own entry, package br/report) and reads its go signals off the member's
// spec. Without --member the step reports nothing and waits for no signal.
type ReportFlags struct {
	// Member is the member the step runs for; Namespace its namespace.
	Member     string
	Namespace  string
	Kubeconfig string
	// Kind is the member's kind, set by the command: VolumeBackupMember (the default) or
	// VolumeRestoreMember.
	Kind string
}

// Register adds the flags to fs.
func (f *ReportFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.Member, "member", "", "member this step runs for (a VolumeBackupMember; a VolumeRestoreMember for the restore steps): the step reports its status and result in the member's status.steps and reads the go signals it waits for off the member's spec")
	fs.StringVar(&f.Namespace, "member-namespace", "", "namespace of --member (default: the pod's namespace, $POD_NAMESPACE or the service account's)")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig for --member when not running in a pod (default: the pod's service account)")
}

// Validate checks the flags without any I/O.
func (f *ReportFlags) Validate() error {
	if f.Member == "" {
		if f.Namespace != "" || f.Kubeconfig != "" {
			return errors.New("--member-namespace and --kubeconfig need --member")
		}
		return nil
	}
	if errs := validation.IsDNS1123Subdomain(f.Member); len(errs) > 0 {
		return fmt.Errorf("--member %q is not a valid object name: %s", f.Member, errs[0])
	}
	if f.Namespace != "" {
		if errs := validation.IsDNS1123Label(f.Namespace); len(errs) > 0 {
			return fmt.Errorf("--member-namespace %q is not a valid namespace: %s", f.Namespace, errs[0])
		}
	}
	return nil
}

// Reporter starts the reporter of step (its entry in the member's status.steps); nil without
// --member, which reports nothing. logf receives write failures. It fails when the member
// cannot be addressed at all (no namespace, no credentials): the agent relies on the reports,
// so a step it started must not run blind.
func (f *ReportFlags) Reporter(step string, logf func(format string, args ...any)) (*report.Reporter, error) {
	if f.Member == "" {
		return nil, nil
	}
	cfg, ns, err := f.config()
	if err != nil {
		return nil, err
	}
	kind, resource := f.kind()
	sink, err := report.NewMemberStep(restconfig.Finish(cfg, "br"), dpv1alpha1.GroupVersion.WithKind(kind), resource, ns, f.Member, step)
	if err != nil {
		return nil, err
	}
	return report.New(report.Options{Command: step, Sink: sink, Log: logf})
}

// WaitSignal waits until the member's spec gives sig (the manager writes the go signals there)
// and returns its value; the step sees the signal within one watch event of its write.
func (f *ReportFlags) WaitSignal(ctx context.Context, sig report.Signal, logf func(string, ...any)) (string, error) {
	if f.Member == "" {
		return "", errors.New("waiting for a go signal needs --member")
	}
	cfg, ns, err := f.config()
	if err != nil {
		return "", err
	}
	_, resource := f.kind()
	m, err := report.NewMember(restconfig.Finish(cfg, "br"), dpv1alpha1.GroupVersion.WithResource(resource), ns, f.Member)
	if err != nil {
		return "", err
	}
	start := time.Now()
	v, err := m.Wait(ctx, sig)
	if err != nil {
		return "", err
	}
	logf("Signal %q taken from %s after %s", v, m, time.Since(start).Round(time.Millisecond))
	return v, nil
}

// Step reads the member's report of step (its entry in status.steps) from the API server;
// false when the member has no such entry.
func (f *ReportFlags) Step(ctx context.Context, step string) (dpv1alpha1.StepReport, bool, error) {
	if f.Member == "" {
		return dpv1alpha1.StepReport{}, false, errors.New("reading a step's report needs --member")
	}
	cfg, ns, err := f.config()
	if err != nil {
		return dpv1alpha1.StepReport{}, false, err
	}
	_, resource := f.kind()
	m, err := report.NewMember(restconfig.Finish(cfg, "br"), dpv1alpha1.GroupVersion.WithResource(resource), ns, f.Member)
	if err != nil {
		return dpv1alpha1.StepReport{}, false, err
	}
	return m.Step(ctx, step)
}

// kind is the member's kind and resource.
func (f *ReportFlags) kind() (string, string) {
	if f.Kind == KindRestoreMember {
		return KindRestoreMember, "volumerestoremembers"
	}
	return KindBackupMember, "volumebackupmembers"
}

// The member kinds a step runs for.
const (
	KindBackupMember  = "VolumeBackupMember"
	KindRestoreMember = "VolumeRestoreMember"
)

// config is the client configuration and namespace of the member: the namespace from the flag,
// else the pod's; credentials from --kubeconfig, else the pod's service account.
func (f *ReportFlags) config() (*rest.Config, string, error) {
	ns := f.Namespace
	if ns == "" {
		var err error
		if ns, err = podenv.Namespace(); err != nil {
			return nil, "", fmt.Errorf("--member-namespace not given: %w", err)
		}
	}
	var (
		cfg *rest.Config
		err error
	)
	if f.Kubeconfig != "" {
		if cfg, err = clientcmd.BuildConfigFromFlags("", f.Kubeconfig); err != nil {
			return nil, "", fmt.Errorf("--kubeconfig: %w", err)
		}
	} else if cfg, err = podenv.RESTConfig(); err != nil {
		return nil, "", fmt.Errorf("--member: %w (outside a pod, give --kubeconfig)", err)
	}
	return cfg, ns, nil
}

// LockedWriter serialises writes from several goroutines to one stream, so that an engine's
// progress lines and the reporter's failures stay whole, and starts each write (one line by
// convention) with the time in UTC: every step's log then reads as one timeline with the
// others', the lab kubelet's and the controllers'.
type LockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewLockedWriter wraps w.
func NewLockedWriter(w io.Writer) *LockedWriter { return &LockedWriter{w: w} }

func (l *LockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := io.WriteString(l.w, time.Now().UTC().Format(time.RFC3339Nano)+" "); err != nil {
		return 0, err
	}
	return l.w.Write(p)
}

// Logf returns a printf-style logger writing one line per call to w.
func Logf(w io.Writer) func(format string, args ...any) {
	return func(format string, args ...any) { _, _ = fmt.Fprintf(w, format+"\n", args...) }
}
