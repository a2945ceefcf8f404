// Package describe is `fedbr describe` and `fedbr logs`: one view of a backup, restore or
// schedule across the control plane and every data plane, and the step pods' logs gathered from
// every plane. Both read only.
package describe

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/fedbr/fedbr/internal/describe"
	"github.com/fedbr/fedbr/internal/manager"
)

// conn are the flags that say where the control plane and the data planes are.
type conn struct {
	kubeconfig, context, namespace string
	planesKubeconfig, planesSecret string
	planesKey                      string
	timeout                        time.Duration
}

func (c *conn) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the control plane (default: $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&c.context, "context", "", "context of the control plane in --kubeconfig (default: its current context)")
	f.StringVarP(&c.namespace, "namespace", "n", "", "namespace of the operation in the control plane (default: the context's)")
	f.StringVar(&c.planesKubeconfig, "planes-kubeconfig", "", "kubeconfig with one context per data plane, named as the operations' k8sClusterName (default: read from --planes-secret)")
	f.StringVar(&c.planesSecret, "planes-secret", "fedbr-system/fedbr-dataplanes", "NAMESPACE/NAME of the manager's data-plane kubeconfig Secret in the control plane, read when --planes-kubeconfig is not given")
	f.StringVar(&c.planesKey, "planes-secret-key", "kubeconfig", "key of the kubeconfig in --planes-secret")
	f.DurationVar(&c.timeout, "request-timeout", 15*time.Second, "bound of each request to a cluster; a data plane that does not answer is reported, the others still shown")
}

// source connects to the control plane and builds a client per data plane.
func (c *conn) source(ctx context.Context) (*describe.Source, string, error) {
	if c.timeout <= 0 {
		return nil, "", errors.New("--request-timeout must be positive")
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", fmt.Errorf("control plane kubeconfig: %w", err)
	}
	ns := c.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", fmt.Errorf("control plane namespace: %w", err)
		}
	}
	scheme, err := manager.Scheme()
	if err != nil {
		return nil, "", err
	}
	cfg.Timeout = c.timeout
	control, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, "", fmt.Errorf("control plane client: %w", err)
	}
	raw, err := c.planesConfig(ctx, control)
	if err != nil {
		return nil, "", err
	}
	planes, err := Planes(raw, c.timeout, func(cfg *rest.Config) (client.Client, error) { return client.New(cfg, client.Options{Scheme: scheme}) })
	if err != nil {
		return nil, "", err
	}
	return &describe.Source{Control: control, Planes: planes}, ns, nil
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
// error instead, so one bad context hides only its own plane.
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
		rc, err := clientcmd.NewNonInteractiveClientConfig(*cfg, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
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
	cmd := &cobra.Command{
		Use:   "describe backup|restore|schedule NAME",
		Short: "Show a VolumeBackup, VolumeRestore or VolumeBackupSchedule across every data plane",
		Long: "describe shows the operation's status and conditions, and for each data plane its member: phase,\n" +
			"conditions, step reports with progress and an estimate of the time left, the step Jobs and pods,\n" +
			"and recent events. A schedule shows its backups. It reads the control plane with your kubeconfig\n" +
			"and the data planes with the manager's kubeconfig (--planes-kubeconfig or --planes-secret).",
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
			ctx := cmd.Context()
			src, ns, err := c.source(ctx)
			if err != nil {
				return err
			}
			src.Events = events
			var v *describe.View
			switch kind {
			case "backup":
				v, err = src.Backup(ctx, ns, name)
			case "restore":
				v, err = src.Restore(ctx, ns, name)
			default:
				v, err = src.Schedule(ctx, ns, name)
			}
			if err != nil {
				return err
			}
			return describe.Render(cmd.OutOrStdout(), v, time.Now())
		},
	}
	c.flags(cmd)
	cmd.Flags().IntVar(&events, "events", 10, "newest events shown per object group")
	return cmd
}

// NewLogsCmd returns `fedbr logs`.
func NewLogsCmd() *cobra.Command {
	var c conn
	var o describe.LogOptions
	cmd := &cobra.Command{
		Use:   "logs backup|restore NAME",
		Short: "Print the step pods' logs of a VolumeBackup or VolumeRestore from every data plane",
		Long: "logs prints the log of every step pod (pause, snapshot, size, clean, lift; restore-volumes,\n" +
			"warm-up, restore-data) of the operation's members in every data plane, each under a header\n" +
			"naming its plane, namespace, pod and step. Pods whose Jobs are gone have no logs left.",
		Args:      cobra.ExactArgs(2),
		ValidArgs: kinds[:2],
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Tail < 0 {
				return errors.New("--tail must not be negative")
			}
			ctx := cmd.Context()
			src, ns, err := c.source(ctx)
			if err != nil {
				return err
			}
			return src.Logs(ctx, cmd.OutOrStdout(), args[0], ns, args[1], o)
		},
	}
	c.flags(cmd)
	cmd.Flags().StringVar(&o.Step, "step", "", "only this step's pods (pause, snapshot, size, clean, lift, restore-volumes, restore-data, warmup-<n>)")
	cmd.Flags().StringVar(&o.Plane, "plane", "", "only this data plane (its k8sClusterName)")
	cmd.Flags().Int64Var(&o.Tail, "tail", 0, "lines from the end of each pod's log (0: all)")
	cmd.Flags().BoolVar(&o.Previous, "previous", false, "the previous run of a restarted container")
	return cmd
}
