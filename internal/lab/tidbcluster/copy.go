package tidbcluster

import (
	"context"
	"fmt"
	"path/filepath"

	pdhttp "github.com/tikv/pd/client/http"

	"github.com/fedbr/fedbr/internal/lab/volumelock"
)

func copyLocked(src, dst string) error {
	l, err := volumelock.Exclusive(src)
	if err != nil {
		return fmt.Errorf("freeze volume %s: %w", src, err)
	}
	defer func() { _ = l.Unlock() }()
	if err := copyDir(src, dst); err != nil {
		return fmt.Errorf("copy volume %s: %w", src, err)
	}
	return nil
}

// SnapshotStore copies store id's volume, as it is at this instant, into
// dst/tikv-<id>: the lab equivalent of one EBS snapshot restored into a
// fresh volume.
func (c *Cluster) SnapshotStore(id uint64, dst string) error {
	return copyLocked(c.StoreDir(id), filepath.Join(dst, fmt.Sprintf("tikv-%d", id)))
}

// SnapshotAll freezes every store's volume at one instant and copies them
// all into dst.
func (c *Cluster) SnapshotAll(dst string) error {
	var dirs []string
	for _, id := range c.StoreIDs() {
		dirs = append(dirs, c.StoreDir(id))
	}
	l, err := volumelock.Exclusive(dirs...)
	if err != nil {
		return fmt.Errorf("freeze volumes: %w", err)
	}
	defer func() { _ = l.Unlock() }()
	for _, id := range c.StoreIDs() {
		if err := copyDir(c.StoreDir(id), filepath.Join(dst, fmt.Sprintf("tikv-%d", id))); err != nil {
			return fmt.Errorf("copy volume of store %d: %w", id, err)
		}
	}
	return nil
}

// StartRecovering starts a cluster on restored volumes as a restore finds
// it before its data phase: a fresh PD marked snapshot-recovering with its
// TSO pushed past resolvedTS, and every store in recovery mode.
func StartRecovering(ctx context.Context, cfg Config, resolvedTS uint64) (*Cluster, error) {
	c, err := StartPD(ctx, cfg)
	if err != nil {
		return nil, err
	}
	h := pdhttp.NewClient("lab-br", []string{c.PDAddr()})
	defer h.Close()
	if err := h.SetSnapshotRecoveringMark(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("mark recovering: %w", err)
	}
	if err := h.ResetTS(ctx, resolvedTS, true); err != nil {
		c.Close()
		return nil, fmt.Errorf("reset ts: %w", err)
	}
	if err := c.StartStores(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Restart stops every store and starts it again (out of recovery mode once
// PD's mark is lifted), then waits for every region's leader.
func (c *Cluster) Restart(ctx context.Context) error {
	for _, id := range c.StoreIDs() {
		c.StopStore(id)
	}
	if err := c.StartStores(ctx); err != nil {
		return err
	}
	return c.WaitLeaders(ctx)
}
