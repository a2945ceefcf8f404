// Package aws is the `fedbr-lab lab aws` command: it serves the AWS double (package
// awsdouble) on one address until interrupted.
package aws

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/signal"
	"path"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/loopfs"
)

type options struct {
	dir     string
	listen  string
	dryRun  bool
	double  awsdouble.Options
	faults  awsdouble.Faults
	latency []string
	// webIdentityRoles are --web-identity-role's NAME=GLOB[,GLOB…].
	webIdentityRoles []string
}

// NewCmd returns the `lab aws` command.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "aws --dir DIR [--listen ADDR]",
		Short: "Serve the AWS double (EC2, EBS direct, CloudWatch, S3, STS) for the lab",
		Long: `Serve the lab's AWS double: EC2 Query API, EBS direct, CloudWatch (FSR credits), a
path-style S3 and STS (presigned GetCallerIdentity, as EKS tokens use it; and IRSA's
AssumeRoleWithWebIdentity for the roles of --web-identity-role), all on one address, with
state kept in --dir across restarts. Point the AWS SDK at it with an endpoint override (fedbr:
--aws-endpoint http://ADDR). It is also an HTTPS proxy (CONNECT) to STS's host names only, with
TLS from the CA it writes to DIR/egress-tls/ca.crt: a client at STS's default endpoint reaches
it with HTTPS_PROXY=http://ADDR and SSL_CERT_FILE on that CA.

Admin API: POST /_lab/instances, GET /_lab/volumes/{id}, GET /_lab/inventory?tag=K=V,
GET|PUT /_lab/faults, POST /_lab/snapshots/{id}/fail?after=DURATION,
POST /_lab/advance?by=DURATION, PUT|DELETE /_lab/holds/{ACTION}, GET /_lab/stats,
GET /_lab/healthz.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "data directory (volumes, snapshots, S3 objects, state)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:4566", "address to serve on")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate the flags and print the configuration without serving")
	f.StringVar(&o.double.Region, "region", "us-west-2", "region served; AZs are the region plus a letter")
	f.Float64Var(&o.double.TimeFactor, "time-factor", 1, "run the double's clock this many times faster than the wall clock")
	f.Float64Var(&o.double.SnapshotMBps, "snapshot-mbps", 40, "snapshot completion speed in MB/s of captured data")
	f.DurationVar(&o.double.SnapshotBaseDuration, "snapshot-base-duration", 0, "fixed time added to each snapshot's completion")
	f.DurationVar(&o.double.VolumeCreateDuration, "volume-create-duration", time.Second, "how long a new volume stays creating")
	f.StringVar(&o.double.Volumes, "volumes", awsdouble.VolumesDir,
		"how volumes are kept: dir (a directory each; snapshots hard-link their files) or ext4 (a sparse device image each, which lab nodes attach as loop devices and mount ext4; a snapshot copies the image with the file systems frozen)")
	f.BoolVar(&o.double.Unlimited, "unlimited", false, "disable AWS's rate limits and quotas")
	f.DurationVar(&o.double.DescribeDelay, "describe-delay", 0, "eventual consistency: how long a created snapshot or volume stays invisible to Describe* and the calls naming it")
	f.BoolVar(&o.double.OmitFullSnapshotSize, "omit-full-snapshot-size", false, "leave fullSnapshotSizeInBytes out of DescribeSnapshots")
	f.StringArrayVar(&o.webIdentityRoles, "web-identity-role", nil, "a role AssumeRoleWithWebIdentity may assume (IRSA), NAME=SUBJECT_GLOB[,SUBJECT_GLOB…], the subjects its trust allows (repeatable)")
	f.Float64Var(&o.faults.Throttle, "throttle", 0, "fraction of API calls to throttle (0-1)")
	f.StringSliceVar(&o.faults.Unavailable, "unavailable", nil, "actions answering the unavailable error (* for all)")
	f.StringSliceVar(&o.latency, "latency", nil, "added latency per action, ACTION=DURATION (* for all)")
	f.IntVar(&o.faults.SnapshotErrors, "snapshot-errors", 0, "number of next snapshots that go to the error state")
	f.DurationVar((*time.Duration)(&o.faults.SnapshotErrorAfter), "snapshot-error-after", 0, "how long a failing snapshot stays pending before it turns error")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

func (o *options) run(cmd *cobra.Command) error {
	if o.faults.Throttle < 0 || o.faults.Throttle > 1 {
		return fmt.Errorf("--throttle %v: want a fraction between 0 and 1", o.faults.Throttle)
	}
	if o.double.DescribeDelay < 0 {
		return fmt.Errorf("--describe-delay %s: want a non-negative duration", o.double.DescribeDelay)
	}
	if o.double.TimeFactor <= 0 {
		return fmt.Errorf("--time-factor %v: want a positive factor", o.double.TimeFactor)
	}
	for _, l := range o.latency {
		action, d, ok := strings.Cut(l, "=")
		dur, err := time.ParseDuration(d)
		if !ok || err != nil {
			return fmt.Errorf("--latency %q: want ACTION=DURATION", l)
		}
		if o.faults.Latency == nil {
			o.faults.Latency = map[string]awsdouble.Duration{}
		}
		o.faults.Latency[action] = awsdouble.Duration(dur)
	}
	for _, r := range o.webIdentityRoles {
		name, globs, ok := strings.Cut(r, "=")
		if !ok || name == "" || globs == "" {
			return fmt.Errorf("--web-identity-role %q: want NAME=SUBJECT_GLOB[,SUBJECT_GLOB…]", r)
		}
		if o.double.WebIdentityRoles == nil {
			o.double.WebIdentityRoles = map[string][]string{}
		}
		for _, g := range strings.Split(globs, ",") {
			if _, err := path.Match(g, ""); err != nil {
				return fmt.Errorf("--web-identity-role %q: subject glob %q: %w", r, g, err)
			}
			o.double.WebIdentityRoles[name] = append(o.double.WebIdentityRoles[name], g)
		}
	}
	if err := awsdouble.ValidVolumes(o.double.Volumes); err != nil {
		return fmt.Errorf("--%w", err)
	}
	if o.double.Volumes == awsdouble.VolumesExt4 && !o.dryRun {
		if err := loopfs.Available(); err != nil {
			return err
		}
	}
	if err := o.faults.Validate(); err != nil {
		return fmt.Errorf("faults: %w", err)
	}
	out := cmd.OutOrStdout()
	if o.dryRun {
		_, err := fmt.Fprintf(out, "would serve the AWS double on %s with data in %s, options %+v, faults %+v\n", o.listen, o.dir, o.double, o.faults)
		return err
	}
	srv, err := awsdouble.Open(o.dir, o.double)
	if err != nil {
		return fmt.Errorf("open AWS double in %s: %w", o.dir, err)
	}
	srv.SetFaults(o.faults)
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	_, _ = fmt.Fprintf(out, "AWS double serving on http://%s (region %s, data in %s)\n", ln.Addr(), o.double.Region, o.dir)
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdownCtx)
	if cerr := srv.Close(); cerr != nil && err == nil {
		err = cerr
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
