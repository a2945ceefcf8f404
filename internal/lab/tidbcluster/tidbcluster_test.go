package tidbcluster

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStoreDirs: a store listed in Config.StoreDirs keeps its data there; the others keep
// theirs under Dir.
func TestStoreDirs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PD and TiKV doubles")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, vol := t.TempDir(), t.TempDir()
	c, err := Start(ctx, Config{Dir: dir, Stores: 3, StoreDirs: map[uint64]string{2: vol}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.WaitLeaders(ctx); err != nil {
		t.Fatal(err)
	}
	if got := c.StoreDir(2); got != vol {
		t.Errorf("StoreDir(2) = %s, want %s", got, vol)
	}
	if got, want := c.StoreDir(1), filepath.Join(dir, "tikv-1"); got != want {
		t.Errorf("StoreDir(1) = %s, want %s", got, want)
	}
	for _, d := range []string{vol, filepath.Join(dir, "tikv-1")} {
		if ents, err := os.ReadDir(d); err != nil || len(ents) == 0 {
			t.Errorf("%s holds no store data: %v", d, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tikv-2")); !os.IsNotExist(err) {
		t.Errorf("store 2 also wrote under Dir: %v", err)
	}
}

// TestStickyAddrs: with StickyAddrs a restarted store listens where it did before.
func TestStickyAddrs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PD and TiKV doubles")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, Config{Dir: t.TempDir(), Stores: 3, StickyAddrs: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	before := c.Store(3).Addr()
	c.StopStore(3)
	if err := c.StartStore(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if got := c.Store(3).Addr(); got != before {
		t.Errorf("restarted store 3 at %s, want %s", got, before)
	}
}

// TestTLSConfigRefused: store processes get TLS only through NodeTLSDir, and NodeTLSDir means
// nothing without TLS; both are refused before anything starts.
func TestTLSConfigRefused(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Dir: t.TempDir(), Binary: "fedbr-lab", TLS: &tls.Config{MinVersion: tls.VersionTLS12}}, "only through NodeTLSDir"},
		{Config{Dir: t.TempDir(), NodeTLSDir: t.TempDir()}, "NodeTLSDir without TLS"},
	} {
		if _, err := StartPD(t.Context(), tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
