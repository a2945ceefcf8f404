package backupmember

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/fedbr/fedbr/internal/meta"
)

func TestDiscover(t *testing.T) {
	rec, err := Discover(*cluster(), "az1", "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	s := rec.TiKV.Stores[0]
	if s.ID != 1 || s.InstanceID != "i-0abc" || len(s.Volumes) != 1 || s.Volumes[0].ID != "vol-1" || s.Volumes[0].Type != meta.DataDirType ||
		s.Volumes[0].MountPath != "/var/lib/tikv" || rec.Fedbr.BackupID != "uid-1" || rec.Fedbr.Cluster != "az1" || rec.TiKV.Replicas != 1 {
		t.Errorf("record %+v store %+v", rec, s)
	}
	if len(rec.Kubernetes.PVs) != 1 || len(rec.Kubernetes.PVCs) != 1 || !strings.Contains(string(rec.Kubernetes.TidbCluster), `"basic"`) {
		t.Errorf("kubernetes section %+v", rec.Kubernetes)
	}
	if strings.Contains(string(rec.Kubernetes.PVs[0]), "managedFields") {
		t.Error("server bookkeeping kept")
	}
}

func TestDiscoverFailures(t *testing.T) {
	for _, tt := range []struct {
		name string
		mut  func(*Cluster)
		want string
	}{
		{"in-tree EBS works", func(c *Cluster) {
			c.PVs["pv-1"].Spec.CSI = nil
			c.PVs["pv-1"].Spec.AWSElasticBlockStore = &corev1.AWSElasticBlockStoreVolumeSource{VolumeID: "aws://us-west-2a/vol-9"}
		}, ""},
		{"store not published yet", func(c *Cluster) { c.TC.Status.TiKV.Stores = nil }, "no store in the TidbCluster's status"},
		{"claim not bound", func(c *Cluster) { c.PVCs["tikv-basic-tikv-0"].Status.Phase = corev1.ClaimPending }, "not bound"},
		{"claim missing", func(c *Cluster) { delete(c.PVCs, "tikv-basic-tikv-0") }, "claim tikv-basic-tikv-0 not found"},
		{"not an AWS node", func(c *Cluster) { c.Nodes["n1"].Spec.ProviderID = "kind://docker/kind/n1" }, "not an AWS instance"},
		{"pod not scheduled", func(c *Cluster) { c.Pods[0].Spec.NodeName = "" }, "not on a known node"},
		{"no TiKV", func(c *Cluster) { c.TC.Spec.TiKV.Replicas = 0 }, "has no TiKV"},
		{"terminating pod does not count", func(c *Cluster) { c.Pods[0].DeletionTimestamp = &c.TC.CreationTimestamp }, "0 are running"},
	} {
		c := cluster()
		tt.mut(c)
		_, err := Discover(*c, "az1", "uid-1")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}
