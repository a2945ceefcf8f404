// Package pd is the `fedbr-lab lab pd` command: it serves the PD double
// (package pddouble) on one address until interrupted.
package pd

import (
	"fmt"
	"net"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/labtls"
	"github.com/fedbr/fedbr/internal/lab/pddouble"
)

type options struct {
	listen string
	dryRun bool
	ca     string
	cert   string
	key    string
	cfg    pddouble.Config
}

// NewCmd returns the `lab pd` command.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "pd --data-dir DIR [--listen ADDR]",
		Short: "Serve the PD double (pdpb gRPC and /pd/api/v1 HTTP on one address)",
		Long: `Serve the lab's PD double: the pdpb gRPC service and PD's /pd/api/v1 HTTP endpoints on
one address, like PD's client port. State (cluster id, TSO window, ids, stores, regions, GC and
service safe points, paused schedulers, TTL'd config, the snapshot-recovering mark) is kept in
--data-dir and survives kill -9. Schedulers hand split, merge and leader-transfer operators to the
TiKV doubles through region heartbeats until paused the way BR pauses them. TiDB's GC worker is
folded in: every --gc-run-interval the GC safe point moves to the TSO minus --gc-life-time, held
back by service safe points (BR's GC pin), and the TiKV doubles collect garbage up to it.
--api v7.5 serves PD v7.5's gRPC API, which has no BatchScanRegions.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.cfg.DataDir, "data-dir", "", "data directory (the PD volume)")
	f.StringVar(&o.listen, "listen", "127.0.0.1:2379", "address to serve gRPC and HTTP on")
	f.StringVar(&o.cfg.AdvertiseURL, "advertise-url", "", "client URL published to clients (default http://<listen address>)")
	f.StringVar(&o.cfg.Name, "name", "pd-0", "member name")
	f.Float64Var(&o.cfg.OperatorRate, "operator-rate", 0.05, "chance per region heartbeat that an active scheduler emits an operator (negative: never)")
	f.Uint64Var(&o.cfg.SplitKeys, "split-keys", 64, "approximate keys above which a region is split")
	f.Uint64Var(&o.cfg.MergeKeys, "merge-keys", 8, "keys under which neighbouring regions are merged")
	f.Uint64Var(&o.cfg.Seed, "seed", 0, "seed of the schedulers' choices")
	f.DurationVar(&o.cfg.GCLifeTime, "gc-life-time", pddouble.DefaultGCLifeTime,
		"how far the GC worker keeps the GC safe point behind the TSO (TiDB's tidb_gc_life_time; negative: no automatic GC)")
	f.DurationVar(&o.cfg.GCRunInterval, "gc-run-interval", pddouble.DefaultGCRunInterval, "how often the GC worker advances the GC safe point")
	f.StringVar(&o.cfg.API, "api", pddouble.APIv85, "PD API to serve: "+pddouble.APIv85+", or "+pddouble.APIv75+" (no BatchScanRegions)")
	f.StringVar(&o.ca, "ca", "", "PEM CA file: with --cert and --key, serve over mutual TLS (client certificates signed by it) and dial over TLS (TiDB's tlsCluster)")
	f.StringVar(&o.cert, "cert", "", "PEM certificate file served and presented (with --ca and --key)")
	f.StringVar(&o.key, "key", "", "PEM key file of --cert (with --ca and --cert)")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate the flags and print the configuration without serving")
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

func (o *options) run(cmd *cobra.Command) error {
	if o.cfg.OperatorRate > 1 {
		return fmt.Errorf("--operator-rate %v: want at most 1", o.cfg.OperatorRate)
	}
	if o.cfg.API != pddouble.APIv85 && o.cfg.API != pddouble.APIv75 {
		return fmt.Errorf("--api %q: want %s or %s", o.cfg.API, pddouble.APIv85, pddouble.APIv75)
	}
	if o.cfg.GCLifeTime == 0 {
		return fmt.Errorf("--gc-life-time 0: want a positive life time, or a negative one for no automatic GC")
	}
	if o.cfg.GCRunInterval <= 0 {
		return fmt.Errorf("--gc-run-interval %v: want a positive interval", o.cfg.GCRunInterval)
	}
	var err error
	if o.cfg.TLS, err = labtls.LoadNode(o.ca, o.cert, o.key); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.dryRun {
		_, err := fmt.Fprintf(out, "would serve the PD double on %s with data in %s, config %+v\n", o.listen, o.cfg.DataDir, o.cfg)
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := pddouble.Start(ctx, o.cfg, ln)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("start PD double: %w", err)
	}
	_, _ = fmt.Fprintf(out, "PD double serving on %s (cluster id %d, data in %s)\n", s.URL(), s.ClusterID(), o.cfg.DataDir)
	<-ctx.Done()
	return s.Close()
}
