package restorevolumes_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/cloud/blob"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/lab/awsdouble/awsdoubletest"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestFitTagsDropOrder: only copied tags go, the source's Kubernetes bookkeeping first, then
// its fedbr tags, then the user's copied tags from the greatest key; what remains never
// exceeds the room; with too few copied tags the answer is ErrTooManyTags.
func TestFitTagsDropOrder(t *testing.T) {
	tags := map[string]string{
		meta.TagRestore: "r1", meta.TagRestorePending: "c/ns", restorevolumes.TagRestoredBy: "new",
		restorevolumes.TagFromSnapshot: "snap-1", "team": "db",
		"snapshot/CSIVolumeName": "pvc-1", "snapshot/kubernetes.io/created-for/pvc/name": "tikv-0",
		"snapshot/fedbr.io/backup": "b1", "snapshot/cost-a": "1", "snapshot/cost-b": "2",
	}
	kept, dropped, err := restorevolumes.FitTags(tags, len(tags))
	if err != nil || len(dropped) != 0 || len(kept) != len(tags) {
		t.Fatalf("within room: kept %d, dropped %v, %v", len(kept), dropped, err)
	}
	for _, c := range []struct {
		room int
		want []string
	}{
		{len(tags) - 2, []string{"snapshot/CSIVolumeName", "snapshot/kubernetes.io/created-for/pvc/name"}},
		{len(tags) - 3, []string{"snapshot/CSIVolumeName", "snapshot/fedbr.io/backup", "snapshot/kubernetes.io/created-for/pvc/name"}},
		{len(tags) - 4, []string{"snapshot/CSIVolumeName", "snapshot/cost-b", "snapshot/fedbr.io/backup", "snapshot/kubernetes.io/created-for/pvc/name"}},
	} {
		kept, dropped, err := restorevolumes.FitTags(tags, c.room)
		if err != nil || !slices.Equal(dropped, c.want) || len(kept) != c.room {
			t.Errorf("room %d: dropped %v (kept %d), %v; want %v", c.room, dropped, len(kept), err, c.want)
		}
		for _, k := range []string{meta.TagRestore, meta.TagRestorePending, restorevolumes.TagRestoredBy, restorevolumes.TagFromSnapshot, "team"} {
			if _, ok := kept[k]; !ok {
				t.Errorf("room %d: dropped %s, which is not a copied tag", c.room, k)
			}
		}
	}
	if _, _, err := restorevolumes.FitTags(tags, 4); !errors.Is(err, cloud.ErrTooManyTags) {
		t.Errorf("room 4 for 5 tags that may not be dropped: %v, want ErrTooManyTags", err)
	}
}

// TestRestoreDropsCopiedTagsOverTheLimit: a snapshot of a volume with 47 tags (49 with the
// backup's identity and namespace) would give its restored volume 53 (AWS refuses more than 50: the double answers TagLimitExceeded); the
// restore drops the least useful copied tags, leaves room for the 4 operator tags and says
// what it dropped. fedbr's own tags count: with an owner, its pending mark and the permanent
// fedbr.io/namespace take two more places.
func TestRestoreDropsCopiedTagsOverTheLimit(t *testing.T) {
	ctx := testContext(t)
	al := awsdoubletest.Serve(t, awsdouble.Options{}, "")
	srv, p := al.Server, al.Provider
	src := map[string]string{"CSIVolumeName": "pvc-a", "kubernetes.io/created-for/pvc/name": "tikv-x-tikv-0"}
	for i := range 45 {
		src[fmt.Sprintf("cost-%02d", i)] = "v"
	}
	in, err := srv.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1, Tags: src}}})
	if err != nil {
		t.Fatal(err)
	}
	// As the backup step tags them for a member in tenant-b, the namespace r2 restores for.
	tags := meta.BackupTags("b1")
	tags[meta.TagNamespace] = "tenant-b"
	snaps, err := p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID}, Tags: tags})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitSnapshots(ctx, []string{snaps[0].ID}, nil); err != nil {
		t.Fatal(err)
	}
	rec := &meta.Record{ClusterInfo: &meta.ClusterInfo{Version: "7.5.0", FullBackupType: meta.FullBackupTypeEBS, ResolvedTS: resolvedTS},
		TiKV: meta.TiKV{Replicas: 1, Stores: []meta.TiKVStore{{ID: 1, InstanceID: in.ID, Volumes: []meta.Volume{
			{ID: in.Volumes[0].ID, Type: meta.DataDirType, SnapshotID: snaps[0].ID, AZ: in.AZ}}}}},
		Fedbr: &meta.Extension{BackupID: "b1"}}
	d, err := blob.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	store := meta.NewStore(d, nil)
	if err := store.PutBackupMeta(ctx, rec); err != nil {
		t.Fatal(err)
	}
	// 49 copied + TiDBCluster-BR, ebs.csi.aws.com/cluster, createdFromSnapshotId, fedbr.io/restore
	// = 53; room 46: the two Kubernetes tags, the two fedbr ones and the three greatest cost tags go.
	dropped := []string{"snapshot/CSIVolumeName", "snapshot/cost-42", "snapshot/cost-43", "snapshot/cost-44", "snapshot/fedbr.io/backup",
		"snapshot/fedbr.io/namespace", "snapshot/kubernetes.io/created-for/pvc/name"}
	var full cloud.Volume // r1's: 46 tags, the room left exactly
	for _, c := range []struct {
		restoreID string
		owner     *meta.Owner
		dropped   []string
		// kept is the volume's tags once the restore completed (its pending mark removed).
		kept int
	}{
		{"r1", nil, dropped, cloud.MaxTags - 4},
		// With an owner, fedbr.io/restore-pending and the permanent fedbr.io/namespace count too:
		// 55 for 46, two more cost tags go; the pending mark leaves once restoremeta is written.
		{"r2", &meta.Owner{Cluster: "9a1f-kube-system-uid", Namespace: "tenant-b"}, append([]string{"snapshot/cost-40", "snapshot/cost-41"}, dropped...), cloud.MaxTags - 5},
	} {
		res, err := restorevolumes.Run(ctx, p, &fakePD{}, store, restorevolumes.Options{RestoreID: c.restoreID, TargetAZ: "us-west-2b", Owner: c.owner})
		if err != nil {
			t.Fatal(err)
		}
		if want := slices.Sorted(slices.Values(c.dropped)); !slices.Equal(res.DroppedTags, want) {
			t.Errorf("restore %s dropped %v, want %v", c.restoreID, res.DroppedTags, want)
		}
		vols, err := p.DescribeVolumes(ctx, []string{res.Volumes[0].VolumeID})
		if err != nil || len(vols) != 1 {
			t.Fatal(vols, err)
		}
		tags := vols[0].Tags
		if n := len(tags); n != c.kept || tags[meta.TagRestore] != c.restoreID || tags["snapshot/cost-39"] != "v" ||
			(c.owner != nil && tags[meta.TagNamespace] != c.owner.Namespace) {
			t.Errorf("restore %s: its volume carries %d tags (want %d): %v", c.restoreID, n, c.kept, tags)
		}
		if c.owner == nil {
			full = vols[0]
		}
	}
	vols := []cloud.Volume{full}
	// The room left takes the operator tags; one more tag than that is AWS's TagLimitExceeded.
	if err := p.TagVolume(ctx, vols[0].ID, restorevolumes.OperatorTags("pv", "pvc", "ns")); err != nil {
		t.Fatalf("operator tags: %v", err)
	}
	if err := p.TagVolume(ctx, vols[0].ID, map[string]string{"one-more": "x"}); !errors.Is(err, cloud.ErrTooManyTags) {
		t.Fatalf("a 51st tag: %v, want ErrTooManyTags (TagLimitExceeded)", err)
	}
}
