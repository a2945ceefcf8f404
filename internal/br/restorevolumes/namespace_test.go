package restorevolumes_test

import (
	"context"
	"maps"
	"sync"
	"testing"

	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/meta"
)

// volumeRecorder passes every call to the provider and records the tags of every
// CreateVolume: what it sends as TagSpecifications, which is what an IAM condition on
// aws:RequestTag sees.
type volumeRecorder struct {
	restorevolumes.Cloud
	mu   sync.Mutex
	tags []map[string]string
}

func (c *volumeRecorder) CreateVolume(ctx context.Context, spec cloud.VolumeSpec) (cloud.Volume, error) {
	c.mu.Lock()
	c.tags = append(c.tags, maps.Clone(spec.Tags))
	c.mu.Unlock()
	return c.Cloud.CreateVolume(ctx, spec)
}

// TestEveryVolumeCarriesItsNamespace: a backup taken for namespace backupNamespace restored
// for a member in another namespace (both the member's owner may act on): every CreateVolume asks for meta.TagNamespace with the
// restoring member's namespace (the tag a per-namespace IAM policy requires at create), never
// the snapshot's (kept, like every copied tag, only as snapshot/fedbr.io/namespace) nor a
// --tags value for that key; every volume carries it once the restore recorded it (it is
// permanent, unlike the pending mark).
func TestEveryVolumeCarriesItsNamespace(t *testing.T) {
	ctx := testContext(t)
	l := newLab(t, awsdouble.Options{})
	owner := &meta.Owner{Cluster: "9a1f-kube-system-uid", Namespace: "tenant-b"}
	rec := &volumeRecorder{Cloud: l.p}
	// The snapshots' namespace and the member's: both the member's owner may act on.
	source := meta.Namespaces{backupNamespace, owner.Namespace}
	res, err := restorevolumes.Run(ctx, rec, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1", TargetAZ: "us-west-2a", Owner: owner,
		SourceNamespaces: source, Tags: map[string]string{meta.TagNamespace: "forged", "team": "db"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.tags) != 4 {
		t.Fatalf("%d CreateVolume calls recorded, want 4", len(rec.tags))
	}
	for i, tags := range rec.tags {
		if tags[meta.TagNamespace] != owner.Namespace {
			t.Errorf("CreateVolume %d asks for tags %v: want %s=%s", i, tags, meta.TagNamespace, owner.Namespace)
		}
	}
	vols := l.srv.Inventory(meta.RestoreTags("r1")).Volumes
	if len(vols) != len(res.Volumes) || len(vols) != 4 {
		t.Fatalf("%d volumes tagged with the restore, it recorded %d; want 4", len(vols), len(res.Volumes))
	}
	for _, v := range vols {
		if v.Tags[meta.TagNamespace] != owner.Namespace || v.Tags["snapshot/"+meta.TagNamespace] != backupNamespace {
			t.Errorf("volume %s carries %s=%q and snapshot/%s=%q, want %q and the snapshot's %q (tags %v)", v.ID,
				meta.TagNamespace, v.Tags[meta.TagNamespace], meta.TagNamespace, v.Tags["snapshot/"+meta.TagNamespace], owner.Namespace, backupNamespace, v.Tags)
		}
		if _, pending := v.Tags[meta.TagRestorePending]; pending {
			t.Errorf("volume %s the restore recorded is still pending: %v", v.ID, v.Tags)
		}
	}
}
