package restoremember

import (
	"testing"

	"github.com/fedbr/fedbr/internal/meta"
)

// FuzzRebuild: the kubernetes section of a restoremeta (PVs, PVCs, the TidbCluster, passed
// through from the backup) is untrusted bytes; no record makes turning it into claims panic,
// and every claim built binds a PV to a restored volume the record names. Its seeds run with
// every `go test`.
func FuzzRebuild(f *testing.F) {
	b, err := record(f).Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, s := range []string{`{}`, `{"kubernetes":{"pvs":[null],"pvcs":[null]}}`, `{"kubernetes":{"pvs":[{}],"pvcs":[{}],"crd_tidb_cluster":null}}`,
		`{"tikv":{"stores":[{"volumes":[{"volume_id":"vol-1","restore_volume_id":"vol-2"}]}]},"kubernetes":{"pvs":[{"spec":{"csi":{"volumeHandle":"vol-1"}}}],"pvcs":[{"metadata":{"name":"tikv-src-tikv-x"}}],"crd_tidb_cluster":{"metadata":{"name":"src"}}}}`,
		`{"kubernetes":{"pvs":[{"spec":{"awsElasticBlockStore":{"volumeID":"aws://us-west-2a/vol-1"}}}],"pvcs":[{"metadata":{"name":"-src-tikv-0"}}],"crd_tidb_cluster":{"metadata":{"name":"src"}}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := meta.Parse(data)
		if err != nil || rec.ValidateIDs() != nil {
			return
		}
		_, _ = ClaimNames(rec, "restored")
		claims, err := Rebuild(rec, Target{TCName: "restored", Namespace: "dst", RestoreID: "ruid-1", Member: "fed-r1", MemberNamespace: "dst"})
		if err != nil {
			return
		}
		restored := map[string]bool{}
		for _, id := range rec.RestoredVolumes() {
			restored[id] = true
		}
		for _, c := range claims {
			if !restored[c.PV.Spec.CSI.VolumeHandle] || c.PVC.Namespace != "dst" || c.PV.Spec.ClaimRef.Name != c.PVC.Name {
				t.Fatalf("claim %s/%s binds volume %s, not one the record restored", c.PVC.Namespace, c.PVC.Name, c.PV.Spec.CSI.VolumeHandle)
			}
		}
		_ = Ordinals(claims)
	})
}
