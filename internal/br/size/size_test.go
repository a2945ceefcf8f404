package size_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/br/size"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/aws"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/lab/volumelock"
	"github.com/fedbr/fedbr/internal/meta"
)

const bs = awsdouble.BlockSize

type lab struct {
	srv  *awsdouble.Server
	p    *aws.Provider
	inst []awsdouble.InstanceInfo
}

func newLab(t *testing.T, opts awsdouble.Options, stores int) *lab {
	t.Helper()
	al := awsdoubletest.Serve(t, opts, "")
	srv, p := al.Server, al.Provider
	l := &lab{srv: srv, p: p}
	for range stores {
		// The CSI driver tags every volume it provisions; snapshots copy the tags.
		in, err := srv.CreateInstance(awsdouble.InstanceSpec{Volumes: []awsdouble.VolumeSpec{
			{Device: "/dev/xvdb", SizeGiB: 10, Tags: map[string]string{"ebs.csi.aws.com/cluster": "true"}},
			{Device: "/dev/xvdc", SizeGiB: 10},
		}})
		if err != nil {
			t.Fatal(err)
		}
		l.inst = append(l.inst, in)
	}
	return l
}

// write appends n blocks of random data (no zero block) to a volume.
func write(t *testing.T, dir string, n int) {
	t.Helper()
	data := make([]byte, n*bs)
	_, _ = rand.Read(data)
	if err := volumelock.NewWriter(dir).Append("data", data); err != nil {
		t.Fatal(err)
	}
}

// backup snapshots every instance and writes the backupmeta into a fresh directory store.
func (l *lab) backup(t *testing.T, id string) *meta.Store {
	t.Helper()
	ctx := testContext(t)
	rec := &meta.Record{ClusterInfo: &meta.ClusterInfo{Version: "7.5.0", FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: 7},
		TiKV: meta.TiKV{Replicas: len(l.inst)}, Fedbr: &meta.Extension{BackupID: id}}
	var ids []string
	for i, in := range l.inst {
		snaps, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID, in.Volumes[1].ID}, Tags: meta.BackupTags(id)})
		if err != nil {
			t.Fatal(err)
		}
		st := meta.TiKVStore{ID: uint64(i + 1), InstanceID: in.ID}
		for j, s := range snaps {
			typ := meta.DataDirType
			if j == 1 {
				typ = "raft-engine.dir"
			}
			st.Volumes = append(st.Volumes, meta.Volume{ID: s.VolumeID, Type: typ, SnapshotID: s.ID})
			ids = append(ids, s.ID)
		}
		rec.TiKV.Stores = append(rec.TiKV.Stores, st)
	}
	if _, err := l.p.WaitSnapshots(ctx, ids, nil); err != nil {
		t.Fatal(err)
	}
	l.srv.Advance(time.Minute) // the next backup starts later
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s := meta.NewStore(d, nil)
	if err := s.PutBackupMeta(ctx, rec); err != nil {
		t.Fatal(err)
	}
	return s
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSizeMatchesBlocksWritten: two stores, two volumes each. Before the first backup the
// data volumes get 3 and 5 blocks, the raft volumes 1; between the backups the first data
// volume gets 2 more blocks and nothing else changes. The sizes must equal the blocks
// written, whether the previous snapshot is discovered or given, and whether the full size
// comes from fullSnapshotSizeInBytes or from listing blocks.
func TestSizeMatchesBlocksWritten(t *testing.T) {
	for _, omit := range []bool{false, true} {
		name := "fullSizeReported"
		if omit {
			name = "fullSizeListed"
		}
		t.Run(name, func(t *testing.T) {
			ctx := testContext(t)
			l := newLab(t, awsdouble.Options{OmitFullSnapshotSize: omit}, 2)
			write(t, l.inst[0].Volumes[0].Dir, 3)
			write(t, l.inst[1].Volumes[0].Dir, 5)
			write(t, l.inst[0].Volumes[1].Dir, 1)
			write(t, l.inst[1].Volumes[1].Dir, 1)
			first := l.backup(t, "b1")
			write(t, l.inst[0].Volumes[0].Dir, 2)
			second := l.backup(t, "b2")

			wantFull := map[string]int64{l.inst[0].Volumes[0].ID: 5 * bs, l.inst[1].Volumes[0].ID: 5 * bs, l.inst[0].Volumes[1].ID: bs, l.inst[1].Volumes[1].ID: bs}
			wantInc := map[string]int64{l.inst[0].Volumes[0].ID: 2 * bs}

			prevRec, err := first.BackupMeta(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range []size.Options{{}, {Previous: prevRec}} {
				var progress bytes.Buffer
				o.Progress = &progress
				sum, err := size.Run(ctx, l.p, second, o)
				if err != nil {
					t.Fatal(err)
				}
				if len(sum.Volumes) != 4 || sum.PreviousDiscovered != (o.Previous == nil) {
					t.Fatalf("summary = %+v", sum)
				}
				for _, v := range sum.Volumes {
					if v.FullBytes != wantFull[v.VolumeID] || v.IncrementalBytes != wantInc[v.VolumeID] || v.PreviousSnapshotID == "" {
						t.Errorf("volume %s: full %d incremental %d (previous %q); want %d and %d", v.VolumeID, v.FullBytes, v.IncrementalBytes,
							v.PreviousSnapshotID, wantFull[v.VolumeID], wantInc[v.VolumeID])
					}
				}
				if sum.FullBytes != 12*bs || sum.IncrementalBytes != 2*bs || sum.Full != "6.0 MiB" || sum.Incremental != "1.0 MiB" {
					t.Errorf("totals = %d (%s) and %d (%s)", sum.FullBytes, sum.Full, sum.IncrementalBytes, sum.Incremental)
				}
				if !strings.Contains(progress.String(), "Backup size: full 6.0 MiB, incremental 1.0 MiB, 4 snapshots sized in ") {
					t.Errorf("progress = %q", progress.String())
				}
				// Each snapshot's own sizing time is logged (how long is not asserted).
				for _, v := range sum.Volumes {
					if want := fmt.Sprintf("(snapshot %s): full %s, incremental %s, sized in ", v.SnapshotID, size.Readable(v.FullBytes), size.Readable(v.IncrementalBytes)); !strings.Contains(progress.String(), want) {
						t.Errorf("no line %q in the progress:\n%s", want, progress.String())
					}
				}
			}

			// The first backup has no predecessor: incremental = full.
			sum, err := size.Run(ctx, l.p, first, size.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if sum.FullBytes != 10*bs || sum.IncrementalBytes != 10*bs {
				t.Fatalf("first backup: full %d incremental %d, want both %d", sum.FullBytes, sum.IncrementalBytes, 10*bs)
			}
			// Level full lists no changed blocks.
			before := l.srv.Stats().Calls["ListChangedBlocks"]
			sum, err = size.Run(ctx, l.p, second, size.Options{Level: size.Full})
			if err != nil {
				t.Fatal(err)
			}
			if sum.FullBytes != 12*bs || sum.IncrementalBytes != 12*bs || l.srv.Stats().Calls["ListChangedBlocks"] != before {
				t.Fatalf("level full: %+v", sum)
			}
		})
	}
}

// TestSizeRefusesPendingSnapshots: a snapshot still pending cannot be sized; the error says
// so instead of a wrong size.
func TestSizeRefusesPendingSnapshots(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{SnapshotBaseDuration: time.Hour}, 1)
	in := l.inst[0]
	snaps, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	d, _ := blob.NewDir(t.TempDir())
	s := meta.NewStore(d, nil)
	rec := &meta.Record{ClusterInfo: &meta.ClusterInfo{Version: "7.5.0", FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: 7},
		TiKV: meta.TiKV{Replicas: 1, Stores: []meta.TiKVStore{{ID: 1, Volumes: []meta.Volume{{ID: in.Volumes[0].ID, SnapshotID: snaps[0].ID}}}}}}
	if err := s.PutBackupMeta(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if _, err := size.Run(ctx, l.p, s, size.Options{}); err == nil || !strings.Contains(err.Error(), "not completed") {
		t.Fatalf("err = %v", err)
	}
}

func TestReadable(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.0 KiB", 3 << 29: "1.5 GiB", 1 << 40: "1.0 TiB"} {
		if got := size.Readable(n); got != want {
			t.Errorf("Readable(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestSizeAsksWithinALineage: ListChangedBlocks compares snapshots of one volume lineage only,
// the first older than the second. A previous backup whose records name another volume's
// snapshot (the two data volumes' snapshots swapped), or a later backup given as the previous
// one, leaves those volumes sized in full, each with a line saying why, instead of asking AWS
// a question it refuses (UNRELATED_SNAPSHOTS) or answering with the wrong blocks.
func TestSizeAsksWithinALineage(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{}, 2)
	write(t, l.inst[0].Volumes[0].Dir, 3)
	write(t, l.inst[1].Volumes[0].Dir, 5)
	first := l.backup(t, "b1")
	write(t, l.inst[0].Volumes[0].Dir, 2)
	second := l.backup(t, "b2")
	firstRec, err := first.BackupMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	secondRec, err := second.BackupMeta(ctx)
	if err != nil {
		t.Fatal(err)
	}
	swapped := firstRec.Clone()
	a, b := &swapped.TiKV.Stores[0].Volumes[0], &swapped.TiKV.Stores[1].Volumes[0]
	a.SnapshotID, b.SnapshotID = b.SnapshotID, a.SnapshotID

	for _, tt := range []struct {
		name     string
		store    *meta.Store
		previous *meta.Record
		full     []string // volumes sized in full
		why      string
	}{
		{"another volume's snapshot", second, swapped, []string{l.inst[0].Volumes[0].ID, l.inst[1].Volumes[0].ID}, "another lineage"},
		{"a later backup", first, secondRec, []string{l.inst[0].Volumes[0].ID, l.inst[1].Volumes[0].ID, l.inst[0].Volumes[1].ID, l.inst[1].Volumes[1].ID}, "not a completed snapshot older than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var progress bytes.Buffer
			sum, err := size.Run(ctx, l.p, tt.store, size.Options{Previous: tt.previous, Progress: &progress})
			if err != nil {
				t.Fatalf("size: %v", err)
			}
			for _, v := range sum.Volumes {
				if !slices.Contains(tt.full, v.VolumeID) {
					continue
				}
				if v.PreviousSnapshotID != "" || v.IncrementalBytes != v.FullBytes {
					t.Errorf("volume %s: previous %q, incremental %d of full %d; want sized in full", v.VolumeID, v.PreviousSnapshotID, v.IncrementalBytes, v.FullBytes)
				}
				if want := "Volume " + v.VolumeID + ": the previous backup's snapshot"; !strings.Contains(progress.String(), want) || !strings.Contains(progress.String(), tt.why) {
					t.Errorf("no line %q … %q in the progress:\n%s", want, tt.why, progress.String())
				}
			}
		})
	}
}
