// Package logs is `fedbr-lab lab logs`: print a pod container's log or a lab component's own log.
package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/env"
)

// followInterval is how often --follow looks for more output once it has read everything.
const followInterval = 200 * time.Millisecond

// NewCmd returns `fedbr-lab lab logs`.
func NewCmd() *cobra.Command {
	var (
		dir      string
		previous bool
		follow   bool
	)
	cmd := &cobra.Command{
		Use:   "logs --dir DIR (CLUSTER/NAMESPACE/POD[/CONTAINER] | aws | operator CLUSTER | eksauth CLUSTER | node NODE | COMPONENT CLUSTER)",
		Short: "Print a pod container's log from the node's files, or a lab component's own log",
		Long: `Print a log of the lab in DIR:

  CLUSTER/NAMESPACE/POD[/CONTAINER]   a pod's container (the container may be left out when the
                                      pod has one); --previous for the run before the current one
  aws                                 the AWS double
  operator CLUSTER                    the stand-in tidb-operator of a data-plane cluster
  eksauth CLUSTER                     the EKS token authenticator of a data-plane cluster (up --eks-auth)
  node NODE                           a lab node process
  COMPONENT CLUSTER                   etcd, kube-apiserver, kube-controller-manager or kube-scheduler

Pod logs are read from the nodes' files, so they are there after the pod, or the whole lab, is
gone; while the lab runs, kubectl logs shows the same.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			l, err := env.Load(dir)
			if err != nil {
				return fmt.Errorf("no lab in %s: %w", dir, err)
			}
			path, err := l.LogFile(args, previous)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return Print(ctx, cmd.OutOrStdout(), path, follow)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "dir", "", "lab state directory")
	f.BoolVarP(&previous, "previous", "p", false, "the container's previous run")
	f.BoolVarP(&follow, "follow", "f", false, "keep printing what is appended until interrupted")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// Print copies the file to w; with follow it keeps copying what is appended until ctx ends.
func Print(ctx context.Context, w io.Writer, path string, follow bool) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	defer func() { _ = f.Close() }()
	for {
		if _, err := io.Copy(w, f); err != nil {
			return err
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.Canceled) {
				return nil
			}
			return ctx.Err()
		case <-time.After(followInterval):
		}
	}
}
