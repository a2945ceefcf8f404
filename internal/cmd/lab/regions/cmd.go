// Package regions is the `fedbr-lab lab regions` command: a region-only cluster (package
// regiononly) of many regions served in a process of its own, so that a step run against it as
// a process of its own is measured alone (make bench-scale).
package regions

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/fedbr/fedbr/internal/lab/pddouble"
	"github.com/fedbr/fedbr/internal/lab/regiononly"
)

// Ready is what --ready-file holds once the cluster serves.
type Ready struct {
	// PD is the PD double's address (gRPC and HTTP on one port).
	PD string `json:"pd"`
	// Regions and Stores are the cluster's size.
	Regions int `json:"regions"`
	Stores  int `json:"stores"`
	// Loaded is how long loading the regions took.
	Loaded string `json:"loaded"`
}

type options struct {
	cfg       regiononly.Config
	readyFile string
}

// NewCmd returns the `lab regions` command.
func NewCmd() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "regions --data-dir DIR --ready-file FILE [--regions N] [--stores N]",
		Short: "Serve a region-only cluster (PD double and stand-in TiKV stores) of many regions until interrupted",
		Long: `Serve a region-only cluster: the PD double with --regions regions loaded straight into memory
and --stores stand-in TiKV stores that know only which regions they hold and lead, serving the
kvproto services the steps call (docs/testing.md, "Region-only mode"). Once it serves, it writes
{"pd": ADDR, ...} to --ready-file. It stops on SIGTERM or SIGINT. make bench-scale runs the steps
against it as processes of their own, to measure their memory and CPU apart from the doubles'.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return o.run(cmd) },
	}
	f := cmd.Flags()
	f.StringVar(&o.cfg.DataDir, "data-dir", "", "the PD double's data directory")
	f.StringVar(&o.readyFile, "ready-file", "", "file written with the PD address once the cluster serves")
	f.IntVar(&o.cfg.Regions, "regions", regiononly.BenchRegions, "regions, tiling the key space")
	f.IntVar(&o.cfg.Stores, "stores", regiononly.BenchStores, "stand-in TiKV stores (at least 3); each region has a peer on three of them")
	f.StringVar(&o.cfg.API, "api", pddouble.APIv85, "PD API to serve: "+pddouble.APIv85+", or "+pddouble.APIv75+" (no BatchScanRegions)")
	_ = cmd.MarkFlagRequired("data-dir")
	_ = cmd.MarkFlagRequired("ready-file")
	return cmd
}

func (o *options) run(cmd *cobra.Command) error {
	switch {
	case o.cfg.Regions < 1 || o.cfg.Stores < 3:
		return fmt.Errorf("--regions %d --stores %d: want a region and 3 stores at least", o.cfg.Regions, o.cfg.Stores)
	case o.cfg.API != pddouble.APIv85 && o.cfg.API != pddouble.APIv75:
		return fmt.Errorf("--api %q: want %s or %s", o.cfg.API, pddouble.APIv85, pddouble.APIv75)
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	start := time.Now()
	c, err := regiononly.Start(ctx, o.cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	b, err := json.Marshal(Ready{PD: c.PDAddr(), Regions: o.cfg.Regions, Stores: o.cfg.Stores, Loaded: time.Since(start).Round(time.Millisecond).String()})
	if err != nil {
		return err
	}
	tmp := o.readyFile + ".tmp"
	if err := os.MkdirAll(filepath.Dir(o.readyFile), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, o.readyFile); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(cmd.OutOrStdout(), "region-only cluster of %d regions over %d stores on %s (loaded in %s)\n", o.cfg.Regions, o.cfg.Stores, c.PDAddr(), time.Since(start).Round(time.Millisecond))
	<-ctx.Done()
	return nil
}
