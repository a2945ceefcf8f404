// Package describe is `fedbr describe` and `fedbr logs`: one view of a backup, restore or
// schedule across the control plane and every data plane, and the step pods' logs gathered from
// every plane. Both read only.
package describe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/fedbr/fedbr/internal/agentlease"
	"github.com/fedbr/fedbr/internal/cmd/br/session"
	"github.com/fedbr/fedbr/internal/describe"
	"github.com/fedbr/fedbr/internal/manager"
	"github.com/fedbr/fedbr/internal/meta"
	"github.com/fedbr/fedbr/internal/plane"
)

// Control is where the control plane is: the flags --kubeconfig, --context, -n/--namespace and
// --request-timeout, read as kubectl reads them. `fedbr get` uses it too.
type Control struct {
	Kubeconfig, Context, Namespace string
	Timeout                        time.Duration
}

// AddFlags adds the control plane's flags to cmd.
func (c *Control) AddFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig of the control plane (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&c.Context, "context", "", "context of the control plane in --kubeconfig (default: its current context)")
	f.StringVarP(&c.Namespace, "namespace", "n", "", "namespace in the control plane (default: the context's)")
	f.DurationVar(&c.Timeout, "request-timeout", 15*time.Second, "bound of each request to a cluster (describe, logs: a data plane that does not answer in time is reported, the others still shown)")
}

// Client connects to the control plane with fedbr's scheme and returns the namespace the
// flags select (-n, else the context's).
func (c *Control) Client() (client.Client, string, error) {
	cfg, ns, err := c.Config()
	if err != nil {
		return nil, "", err
	}
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, "", err
	}
	control, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("control plane client: %w", err)
	}
	return control, ns, nil
}

// Config is the control plane's client configuration (bounded by --request-timeout) and the
// namespace the flags select.
func (c *Control) Config() (*rest.Config, string, error) {
	if c.Timeout <= 0 {
		return nil, "", errors.New("--request-timeout must be positive")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.Kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.Context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("control plane kubeconfig: %w", err)
	}
	ns := c.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("control plane namespace: %w", err)
		}
	}
	cfg.Timeout = c.Timeout
	return cfg, ns, nil
}

// conn are the flags that say where the control plane and the data planes are.
type conn struct {
	Control
	planesKubeconfig, planesSecret string
	planesKey                      string
	agentNamespace                 string
}

func (c *conn) flags(cmd *cobra.Command) {
	c.AddFlags(cmd)
	f := cmd.Flags()
	f.StringVar(&c.planesKubeconfig, "planes-kubeconfig", "", "kubeconfig with one context per data plane, named as the operations' k8sClusterName (default: read from --planes-secret)")
	f.StringVar(&c.planesSecret, "planes-secret", "fedbr-system/fedbr-dataplanes", "NAMESPACE/NAME of the manager's data-plane kubeconfig Secret in the control plane, read when --planes-kubeconfig is not given")
	f.StringVar(&c.planesKey, "planes-secret-key", "kubeconfig", "key of the kubeconfig in --planes-secret")
	f.StringVar(&c.agentNamespace, "agent-namespace", agentlease.DefaultNamespace, "the agents' namespace in the data planes (the manager's --agent-namespace), where each agent's Lease says whether it runs")
}

// source connects to the control plane and builds a client per data plane.
func (c *conn) source(ctx context.Context) (*describe.Source, string, error) {
	control, ns, err := c.Client()
	if err != nil {
		return nil, "", err
	}
	scheme := control.Scheme()
	raw, err := c.planesConfig(ctx, control)
	if err != nil {
		return nil, "", err
	}
	planes, err := Planes(raw, c.Timeout, func(cfg *rest.Config) (client.Client, error) { return client.New(cfg, client.Options{Scheme: scheme}) })
	if err != nil {
		return nil, "", err
	}
	return &describe.Source{Control: control, Planes: planes, AgentNamespace: c.agentNamespace}, ns, nil
}

func (c *conn) planesConfig(ctx context.Context, control client.Client) ([]byte, error) {
	if c.planesKubeconfig != "" {
		b, err := os.ReadFile(c.planesKubeconfig)
		if err != nil {
			return nil, fmt.Errorf("--planes-kubeconfig: %w", err)
		}
		return b, nil
	}
	ns, name, ok := strings.Cut(c.planesSecret, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--planes-secret %q: want NAMESPACE/NAME", c.planesSecret)
	}
	var s corev1.Secret
	if err := control.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("read the data planes' kubeconfig from Secret %s (or give --planes-kubeconfig): %w", c.planesSecret, err)
	}
	b, ok := s.Data[c.planesKey]
	if !ok {
		return nil, fmt.Errorf("the Secret %s has no key %q (--planes-secret-key)", c.planesSecret, c.planesKey)
	}
	return b, nil
}

// Planes builds a client per context of a kubeconfig: a context that does not load gets its
// error instead, so one bad context hides only its own plane. Each context is built as the
// manager builds it (plane.Config): the kubeconfig usually comes from a Secret, so an exec
// credential plugin is never run on this machine — the two EKS token commands are served
// in-process with this machine's AWS identity from the environment, any other plugin or
// auth-provider leaves its plane unreadable with the reason.
func Planes(kubeconfig []byte, timeout time.Duration, newClient func(*rest.Config) (client.Client, error)) (map[string]describe.Plane, error) {
	cfg, err := clientcmd.Load(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("data planes' kubeconfig: %w", err)
	}
	if len(cfg.Contexts) == 0 {
		return nil, errors.New("data planes' kubeconfig has no context")
	}
	planes := map[string]describe.Plane{}
	for name := range cfg.Contexts {
		rc, err := plane.Config(cfg, name, "describe")
		if err != nil {
			planes[name] = describe.Plane{Err: fmt.Errorf("context %s: %w", name, err)}
			continue
		}
		rc.Timeout = timeout
		cl, err := newClient(rc)
		if err != nil {
			planes[name] = describe.Plane{Err: fmt.Errorf("context %s: %w", name, err)}
			continue
		}
		kube, err := kubernetes.NewForConfig(rc)
		if err != nil {
			planes[name] = describe.Plane{Err: fmt.Errorf("context %s: %w", name, err)}
			continue
		}
		planes[name] = describe.Plane{Client: cl, Kube: kube}
	}
	return planes, nil
}

var kinds = []string{"backup", "restore", "schedule"}

// NewDescribeCmd returns `fedbr describe`.
func NewDescribeCmd() *cobra.Command {
	var c conn
	var events int
	var watch bool
	var interval time.Duration
	cmd := &cobra.Command{
		Use:   "describe backup|restore|schedule NAME",
		Short: "Show a VolumeBackup, VolumeRestore or VolumeBackupSchedule across every data plane",
		Long: "describe shows the operation's status and conditions, and for each data plane its member: phase,\n" +
			"conditions, step reports with progress and an estimate of the time left, the step Jobs and pods,\n" +
			"and recent events. A schedule shows its backups. It reads the control plane with your kubeconfig\n" +
			"and the data planes with the manager's kubeconfig (--planes-kubeconfig or --planes-secret).\n" +
			"With --watch it reads again every --interval and shows the view again whenever it changed, until\n" +
			"the operation is Complete, Failed, Cleaned or deleted, or Ctrl-C.",
		Args:      cobra.ExactArgs(2),
		ValidArgs: kinds,
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, name := args[0], args[1]
			if !slices.Contains(kinds, kind) {
				return fmt.Errorf("describe %q: want one of %s", kind, strings.Join(kinds, ", "))
			}
			if events < 0 {
				return errors.New("--events must not be negative")
			}
			if watch && interval <= 0 {
				return errors.New("--interval must be positive")
			}
			ctx := cmd.Context()
			src, ns, err := c.source(ctx)
			if err != nil {
				return err
			}
			src.Events = events
			gather := func(ctx context.Context) (*describe.View, error) {
				switch kind {
				case "backup":
					return src.Backup(ctx, ns, name)
				case "restore":
					return src.Restore(ctx, ns, name)
				default:
					return src.Schedule(ctx, ns, name)
				}
			}
			out := cmd.OutOrStdout()
			if !watch {
				v, err := gather(ctx)
				if err != nil {
					return err
				}
				var o describe.Observer
				now := time.Now()
				o.Observe(v, now)
				return describe.Render(out, v, now)
			}
			tick := time.NewTicker(interval)
			defer tick.Stop()
			w := &describe.Watch{
				Gather: gather,
				Draw:   func(v *describe.View, now time.Time) error { return draw(out, v, now, interval) },
				Note:   func(s string) { _, _ = fmt.Fprintln(out, s) },
				Next: func(ctx context.Context) bool {
					select {
					case <-ctx.Done():
						return false
					case <-tick.C:
						return true
					}
				},
				Now: time.Now,
			}
			return w.Run(ctx)
		},
	}
	c.flags(cmd)
	cmd.Flags().IntVar(&events, "events", 10, "newest events shown per object group")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "read again every --interval and show the view again when it changed, until the operation is Complete, Failed, Cleaned or deleted (a schedule: until Ctrl-C); the snapshot step's time left is estimated from the percent read between reads")
	cmd.Flags().DurationVar(&interval, "interval", 2*time.Second, "with --watch, how often to read again")
	return cmd
}

// draw shows one view of a watch: on a terminal in place of the previous one, else after it
// under a line with the time it was read.
func draw(w io.Writer, v *describe.View, now time.Time, interval time.Duration) error {
	header := "--- " + now.UTC().Format(time.RFC3339) + " ---\n"
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			header = fmt.Sprintf("\x1b[H\x1b[2J%s, read every %s; Ctrl-C to stop\n", now.Format("15:04:05"), interval)
		}
	}
	if _, err := io.WriteString(w, header); err != nil {
		return err
	}
	return describe.Render(w, v, now)
}

// NewLogsCmd returns `fedbr logs`.
func NewLogsCmd() *cobra.Command {
	var c conn
	var o describe.LogOptions
	var saved bool
	var region, endpoint string
	cmd := &cobra.Command{
		Use:   "logs backup|restore NAME",
		Short: "Print the step pods' logs of a VolumeBackup or VolumeRestore from every data plane",
		Long: "logs prints the log of every step pod (pause, snapshot, size, clean, lift; restore-volumes,\n" +
			"warm-up, restore-data) of the operation's members in every data plane, each under a header\n" +
			"naming its plane, namespace, pod and step. Pods whose Jobs are gone have no logs left.\n\n" +
			"--saved prints instead the logs the steps saved beside the backup's metadata (the agent's\n" +
			"--save-step-logs: snapshot and size of a backup, restore-volumes and restore-data of a\n" +
			"restore), read from S3 with your own AWS credentials: they outlive the Jobs.",
		Args:      cobra.ExactArgs(2),
		ValidArgs: kinds[:2],
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Tail < 0 {
				return errors.New("--tail must not be negative")
			}
			if !saved && (region != "" || endpoint != "") {
				return errors.New("--region and --aws-endpoint go with --saved")
			}
			if saved && (o.Tail > 0 || o.Previous) {
				return errors.New("--tail and --previous are for the pods' logs, not --saved")
			}
			if err := (&session.Flags{Endpoint: endpoint}).ValidateEndpoint(); err != nil {
				return err
			}
			ctx := cmd.Context()
			src, ns, err := c.source(ctx)
			if err != nil {
				return err
			}
			if saved {
				return src.SavedLogs(ctx, cmd.OutOrStdout(), args[0], ns, args[1], o, func(ctx context.Context, storage string) (*meta.Store, error) {
					f := session.Flags{Storage: storage, Region: region, Endpoint: endpoint}
					return f.Store(ctx)
				})
			}
			return src.Logs(ctx, cmd.OutOrStdout(), args[0], ns, args[1], o)
		},
	}
	cmd.Flags().BoolVar(&saved, "saved", false, "print the logs the steps saved under the backup's storage (the agent's --save-step-logs), read from S3 with your AWS credentials, instead of the pods'")
	cmd.Flags().StringVar(&region, "region", "", "with --saved: the S3 region when the storage names none (default: from the AWS environment)")
	cmd.Flags().StringVar(&endpoint, "aws-endpoint", "", "with --saved: an S3 endpoint override (the lab's AWS double)")
	c.flags(cmd)
	cmd.Flags().StringVar(&o.Step, "step", "", "only this step's pods (pause, snapshot, size, clean, lift, restore-volumes, restore-data, warmup-<n>)")
	cmd.Flags().StringVar(&o.Plane, "plane", "", "only this data plane (its k8sClusterName)")
	cmd.Flags().Int64Var(&o.Tail, "tail", 0, "lines from the end of each pod's log (0: all)")
	cmd.Flags().BoolVar(&o.Previous, "previous", false, "the previous run of a restarted container")
	return cmd
}
