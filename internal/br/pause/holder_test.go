package pause

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestHolderPlacesKeepsAndLifts: the holder (what restore-data keeps over its data phase) pins
// GC at ts − 1 and pauses PD's schedulers and limits, names exactly that as its identity, and
// Release lifts all of it. Asked to hold below a ts GC already reached, it refuses with the
// reason and places nothing.
func TestHolderPlacesKeepsAndLifts(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := startEnv(t, ctx)
	ts := e.tso(t, ctx)
	h, err := HoldGCAndSchedules(ctx, HolderDeps{PD: e.pd, HTTP: e.http, Log: t.Logf}, HolderConfig{TS: ts, TTL: time.Minute, Stores: 3})
	if err != nil {
		t.Fatal(err)
	}
	hold := h.Hold()
	if held, err := e.readHeld(ctx, hold); err != nil || !held.GC || len(held.Schedulers) == 0 || len(held.Settings) == 0 {
		t.Fatalf("PD holds %+v (%v) of the holder, want GC, schedulers and settings", held, err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if held, err := e.readHeld(ctx, hold); err != nil || held.Any() {
		t.Fatalf("PD still holds %s (%v) after Release", held, err)
	}

	gc, err := e.pd.UpdateGCSafePoint(ctx, ts+10)
	if err != nil || gc < ts {
		t.Fatalf("advance GC to %d: %d, %v", ts+10, gc, err)
	}
	_, err = HoldGCAndSchedules(ctx, HolderDeps{PD: e.pd, HTTP: e.http}, HolderConfig{TS: ts, TTL: time.Minute, Stores: 3, ServiceID: "fedbr-too-late"})
	if err == nil || !strings.Contains(err.Error(), "has already reached") {
		t.Fatalf("hold below a ts GC passed: %v, want the refusal", err)
	}
	hold.ServiceSafePoint = "fedbr-too-late"
	if held, err := e.readHeld(ctx, hold); err != nil || held.Any() {
		t.Errorf("PD holds %s (%v) after a refused hold", held, err)
	}
}
