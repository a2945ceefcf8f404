// Package tikv is the `fedbr-lab lab tikv` command: it runs one TiKV double
// store (package tikvdouble) until interrupted.
package tikv

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/labtls"
	"github.com/fedbr/fedbr/internal/lab/tikvdouble"
)

type options struct {
	listen    string
	dryRun    bool
	ca        string
	cert      string
	key       string
	splitKeys []string
	initial   []uint
	verbose   bool
	isolate   time.Duration
	cfg       tikvdouble.Config
}

// NewCmd returns the `lab tikv` command.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "tikv --store-id N --data-dir DIR --pd ADDR [--listen ADDR]",
		Short: "Run one TiKV double store (tikvpb, backup and recover_data gRPC)",
		Long: `Run one store of the lab's TiKV double. It serves tikvpb.Tikv (transactions, flashback,
peer replication), backup.Backup (PrepareSnapshotBackup, CheckPendingAdminOp) and, when PD's
snapshot-recovering mark is set at start, recover_data.RecoverData. Every --gc-poll-interval it
reads PD's GC safe point and drops the MVCC versions below it, as TiKV's GC does. State is a
checkpoint on --data-dir and a log of checksummed records since on --raft-dir (default: the data
dir), each written under its volume's .lock, so snapshots of both volumes taken together are a
crash image (kill -9 loses nothing acknowledged; a torn log tail is dropped at start). Volumes
that are not one store's at one moment are refused at start. A fresh cluster is bootstrapped by the first of
--initial-stores. SIGUSR1 makes the store unreachable for --isolate-for. Where real TiKV
panics (a flashback whose commit ts is below a key's latest commit), the store exits non-zero
with the reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.Uint64Var(&o.cfg.StoreID, "store-id", 0, "this store's id (fixed per volume)")
	f.StringVar(&o.cfg.DataDir, "data-dir", "", "data directory (the TiKV data volume)")
	f.StringVar(&o.cfg.RaftDir, "raft-dir", "", "log directory on a second volume (TiKV's raft-engine.dir); default --data-dir")
	f.StringVar(&o.cfg.PD, "pd", "127.0.0.1:2379", "PD address host:port")
	f.StringVar(&o.listen, "listen", "127.0.0.1:20160", "address to serve gRPC on")
	f.StringVar(&o.cfg.AdvertiseAddr, "advertise-addr", "", "address published to PD (default the listen address)")
	f.UintSliceVar(&o.initial, "initial-stores", nil, "stores of a fresh cluster's layout; the first bootstraps (at least 3)")
	f.StringSliceVar(&o.splitKeys, "split-keys", nil, "keys pre-splitting a fresh cluster into regions")
	f.DurationVar(&o.cfg.Tick, "tick", 100*time.Millisecond,
		"raft tick: elections after 10-20 idle ticks, leader heartbeats every 2, PD heartbeats every 4 (TiKV's is 1s)")
	f.IntVar(&o.cfg.SlowApply, "slow-apply", 0, "followers apply only every N ticks (a deliberately slow follower)")
	f.Int64Var(&o.cfg.CompactBytes, "compact-bytes", 8<<20, "wal size that triggers compaction")
	f.DurationVar(&o.cfg.GCPollInterval, "gc-poll-interval", tikvdouble.DefaultGCPollInterval,
		"how often the store reads PD's GC safe point and collects MVCC garbage up to it (TiKV: 10s)")
	f.BoolVar(&o.verbose, "verbose", false, "log to stderr")
	f.DurationVar(&o.isolate, "isolate-for", 10*time.Second, "on SIGUSR1, make the store unreachable (raft and client traffic) for this long")
	f.StringVar(&o.ca, "ca", "", "PEM CA file: with --cert and --key, serve over mutual TLS (client certificates signed by it) and dial over TLS (TiDB's tlsCluster)")
	f.StringVar(&o.cert, "cert", "", "PEM certificate file served and presented (with --ca and --key)")
	f.StringVar(&o.key, "key", "", "PEM key file of --cert (with --ca and --cert)")
	f.BoolVar(&o.dryRun, "dry-run", false, "validate the flags and print the configuration without serving")
	_ = cmd.MarkFlagRequired("store-id")
	_ = cmd.MarkFlagRequired("data-dir")
	return cmd
}

func (o *options) run(cmd *cobra.Command) error {
	if o.cfg.StoreID == 0 {
		return fmt.Errorf("--store-id must be positive")
	}
	for _, id := range o.initial {
		o.cfg.InitialStores = append(o.cfg.InitialStores, uint64(id))
	}
	if o.cfg.GCPollInterval <= 0 {
		return fmt.Errorf("--gc-poll-interval %v: want a positive interval", o.cfg.GCPollInterval)
	}
	if n := len(o.cfg.InitialStores); n > 0 && n < 3 {
		return fmt.Errorf("--initial-stores %v: want at least 3 stores", o.cfg.InitialStores)
	}
	o.cfg.PD = strings.TrimPrefix(strings.TrimPrefix(o.cfg.PD, "http://"), "https://")
	for _, k := range o.splitKeys {
		o.cfg.SplitKeys = append(o.cfg.SplitKeys, []byte(k))
	}
	var err error
	if o.cfg.TLS, err = labtls.LoadNode(o.ca, o.cert, o.key); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if o.dryRun {
		_, err := fmt.Fprintf(out, "would run TiKV double store %d on %s with data in %s, PD %s, initial stores %v, %d split keys\n",
			o.cfg.StoreID, o.listen, o.cfg.DataDir, o.cfg.PD, o.cfg.InitialStores, len(o.cfg.SplitKeys))
		return err
	}
	if o.verbose {
		o.cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), nil))
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", o.listen, err)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := tikvdouble.Start(ctx, o.cfg, ln)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("start TiKV double store %d: %w", o.cfg.StoreID, err)
	}
	_, _ = fmt.Fprintf(out, "TiKV double store %d serving on %s (recovery mode %v, data in %s, log in %s)\n",
		s.ID(), s.Addr(), s.Recovery(), o.cfg.DataDir, cmp.Or(o.cfg.RaftDir, o.cfg.DataDir))
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	for {
		select {
		case <-ctx.Done():
			return s.Close()
		case <-s.Crashed():
			// A panicking TiKV exits, and its pod starts it again.
			return fmt.Errorf("TiKV double store %d crashed: %w", s.ID(), s.CrashError())
		case <-usr1:
			s.Isolate(o.isolate)
			_, _ = fmt.Fprintf(out, "store %d unreachable for %v\n", s.ID(), o.isolate)
		}
	}
}
