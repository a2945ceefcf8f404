package session

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
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

// StartKey is the status ConfigMap key an armed step (`--wait-start`: pause, restore-data)
// waits for; the agent's job.StartKey.
const StartKey = "start"

// ReportFlags point a command at the ConfigMap it reports its status to (package br/report).
type ReportFlags struct {
	ConfigMap  string
	Namespace  string
	Kubeconfig string
	// Member is the member the step runs for, in the ConfigMap's namespace: a
	// VolumeBackupMember, or the resource MemberResource names.
	Member         string
	MemberResource string
}

// Register adds the flags to fs.
func (f *ReportFlags) Register(fs *pflag.FlagSet) {
	fs.StringVar(&f.ConfigMap, "status-configmap", "", "ConfigMap to report the status and the final result to (keys <command> and <command>.result); created if missing")
	fs.StringVar(&f.Namespace, "status-configmap-namespace", "", "namespace of --status-configmap (default: the pod's namespace, $POD_NAMESPACE or the service account's)")
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig for --status-configmap when not running in a pod (default: the pod's service account)")
	fs.StringVar(&f.Member, "member", "", "member (VolumeBackupMember, or VolumeRestoreMember for restore-data; in --status-configmap's namespace) this step runs for: the go signals it waits for are also read from its spec, and the facts the manager waits for stamped into its status, one hop before the agent relays them")
}

// Validate checks the flags without any I/O.
func (f *ReportFlags) Validate() error {
	if f.ConfigMap == "" {
		if f.Namespace != "" || f.Kubeconfig != "" || f.Member != "" {
			return errors.New("--status-configmap-namespace, --kubeconfig and --member need --status-configmap")
		}
		return nil
	}
	if f.Member != "" {
		if errs := validation.IsDNS1123Subdomain(f.Member); len(errs) > 0 {
			return fmt.Errorf("--member %q is not a valid object name: %s", f.Member, errs[0])
		}
	}
	if errs := validation.IsDNS1123Subdomain(f.ConfigMap); len(errs) > 0 {
		return fmt.Errorf("--status-configmap %q is not a valid ConfigMap name: %s", f.ConfigMap, errs[0])
	}
	if f.Namespace != "" {
		if errs := validation.IsDNS1123Label(f.Namespace); len(errs) > 0 {
			return fmt.Errorf("--status-configmap-namespace %q is not a valid namespace: %s", f.Namespace, errs[0])
		}
	}
	return nil
}

// Reporter starts the reporter of command (its key in the ConfigMap); nil without
// --status-configmap, which reports nothing. logf receives write failures. It fails when the
// ConfigMap cannot be addressed at all (no namespace, no credentials): the agent relies on the
// reports, so a command it started must not run blind. Transient phases are written only when
// they last (report.Options.Transient).
func (f *ReportFlags) Reporter(command string, logf func(format string, args ...any), transient ...string) (*report.Reporter, error) {
	if f.ConfigMap == "" {
		return nil, nil
	}
	sink, err := f.sink(command)
	if err != nil {
		return nil, err
	}
	return report.New(report.Options{Command: command, Sink: sink, Log: logf, Transient: transient})
}

// WaitKey waits until the ConfigMap holds key and returns its value (see report.WaitKey).
// With --member, sig is read off the member's spec at the same time, and the first of the two
// to give the signal wins: the manager writes it into the member, the agent then copies it into
// the ConfigMap, so the member is one hop sooner. A member this step may not read (a service
// account without the rule) is logged to logf and left to the ConfigMap.
func (f *ReportFlags) WaitKey(ctx context.Context, command, key string, sig report.Signal, logf func(string, ...any)) (string, error) {
	if f.ConfigMap == "" {
		return "", errors.New("waiting for a ConfigMap key needs --status-configmap")
	}
	sink, err := f.sink(command)
	if err != nil {
		return "", err
	}
	if f.Member == "" || sig == nil {
		return sink.WaitKey(ctx, key)
	}
	m, err := f.member()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type answer struct {
		v, from string
		err     error
	}
	answers := make(chan answer, 2)
	go func() {
		v, err := sink.WaitKey(ctx, key)
		answers <- answer{v, "ConfigMap " + sink.String() + " key " + key, err}
	}()
	go func() {
		v, err := m.Wait(ctx, sig)
		answers <- answer{v, m.String(), err}
	}()
	for range 2 {
		a := <-answers
		switch {
		case a.err == nil:
			logf("Signal %q taken from %s", a.v, a.from)
			return a.v, nil
		case errors.Is(a.err, report.ErrCannotWatch):
			logf("Not watching the member (%v); waiting for the ConfigMap alone", a.err)
		default:
			return "", a.err
		}
	}
	return "", errors.New("no source of the signal left")
}

// member addresses --member.
func (f *ReportFlags) member() (*report.Member, error) {
	cfg, ns, err := f.config()
	if err != nil {
		return nil, err
	}
	resource := f.MemberResource
	if resource == "" {
		resource = "volumebackupmembers"
	}
	return report.NewMember(restconfig.Finish(cfg, "br"), dpv1alpha1.GroupVersion.WithResource(resource), ns, f.Member)
}

// StampMember server-side applies fields into --member's status as the command's field
// manager (fedbr-br-<command>), trying three times; nothing without --member. The agent
// reports the same facts one hop later, so a failure is only logged.
func (f *ReportFlags) StampMember(ctx context.Context, command string, fields map[string]any, logf func(string, ...any)) {
	if f.ConfigMap == "" || f.Member == "" {
		return
	}
	start := time.Now()
	if err := f.stampMember(ctx, command, fields); err != nil {
		logf("Not stamping the member (the agent reports it instead): %v", err)
		return
	}
	logf("Stamped %v into the member's status in %s", slices.Sorted(maps.Keys(fields)), time.Since(start).Round(time.Millisecond))
}

func (f *ReportFlags) stampMember(ctx context.Context, command string, fields map[string]any) error {
	m, err := f.member()
	if err != nil {
		return err
	}
	gvk := dpv1alpha1.GroupVersion.WithKind("VolumeBackupMember")
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, report.DefaultAttemptTimeout)
		err = m.ApplyStatus(actx, gvk, report.FieldManager(command), fields)
		cancel()
		if err == nil || attempt == 3 {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
		}
	}
}

// config is the client configuration and namespace of the ConfigMap (and the member): the
// namespace from the flag, else the pod's; credentials from --kubeconfig, else the pod's
// service account.
func (f *ReportFlags) config() (*rest.Config, string, error) {
	ns := f.Namespace
	if ns == "" {
		var err error
		if ns, err = podenv.Namespace(); err != nil {
			return nil, "", fmt.Errorf("--status-configmap-namespace not given: %w", err)
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
		return nil, "", fmt.Errorf("--status-configmap: %w (outside a pod, give --kubeconfig)", err)
	}
	return cfg, ns, nil
}

// sink addresses the ConfigMap.
func (f *ReportFlags) sink(command string) (*report.ConfigMap, error) {
	cfg, ns, err := f.config()
	if err != nil {
		return nil, err
	}
	return report.NewConfigMap(restconfig.Finish(cfg, "br"), ns, f.ConfigMap, command)
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
