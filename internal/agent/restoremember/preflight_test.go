package restoremember

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/condition"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/meta"
)

// withStorageVolumes is the target TidbCluster with spec.tikv.storageVolumes named names.
func withStorageVolumes(tc *pcv1alpha1.TidbCluster, names ...string) *pcv1alpha1.TidbCluster {
	tc.Spec.TiKV.StorageVolumes = nil
	for _, n := range names {
		tc.Spec.TiKV.StorageVolumes = append(tc.Spec.TiKV.StorageVolumes, pcv1alpha1.StorageVolume{Name: n})
	}
	return tc
}

// dropVolume removes the backed-up volume id (and its PV and claim stay: only the store's
// record loses it), as a backup whose TiKV members had different layouts would look.
func dropVolume(rec *meta.Record, id string) *meta.Record {
	for i := range rec.TiKV.Stores {
		rec.TiKV.Stores[i].Volumes = slices.DeleteFunc(rec.TiKV.Stores[i].Volumes, func(v meta.Volume) bool { return v.ID == id })
	}
	return rec
}

func TestClaimNames(t *testing.T) {
	names, err := ClaimNames(record(t), "restored")
	want := []string{"tikv-raft-restored-tikv-0", "tikv-raft-restored-tikv-1", "tikv-restored-tikv-0", "tikv-restored-tikv-1"}
	if err != nil || !slices.Equal(names, want) {
		t.Errorf("ClaimNames = %v, %v; want %v (ordinals 3 and 5 renumbered)", names, err, want)
	}
	// The same names Rebuild gives the claims of the restored volumes.
	claims, err := Rebuild(record(t), Target{TCName: "restored", Namespace: "dst", RestoreID: "ruid-1", Member: "fed-r1", MemberNamespace: "dst"})
	if err != nil {
		t.Fatal(err)
	}
	var rebuilt []string
	for _, c := range claims {
		rebuilt = append(rebuilt, c.PVC.Name)
	}
	if !slices.Equal(rebuilt, want) {
		t.Errorf("Rebuild made %v, ClaimNames said %v", rebuilt, want)
	}
	noKubernetes := record(t)
	noKubernetes.Kubernetes.PVCs = nil
	if _, err := ClaimNames(noKubernetes, "restored"); !errors.Is(err, ErrRebuild) {
		t.Errorf("a backup without claims: %v, want ErrRebuild", err)
	}
}

func TestCheckLayout(t *testing.T) {
	for _, tt := range []struct {
		name string
		rec  *meta.Record
		tc   *pcv1alpha1.TidbCluster
		err  string // "" accepts
	}{
		{"same volumes", record(t), withStorageVolumes(targetTC(2, true), "raft"), ""},
		{"the target lacks the backup's storage volume (#5292: one volume fewer)", record(t), withStorageVolumes(targetTC(2, true)),
			"the backed-up TiKV member 3 had 2 volumes (tikv, tikv-raft) and TidbCluster dst/restored's TiKV pods mount 1 (tikv)"},
		{"the target has a storage volume more", record(t), withStorageVolumes(targetTC(2, true), "raft", "wal"),
			"had 2 volumes (tikv, tikv-raft) and TidbCluster dst/restored's TiKV pods mount 3 (tikv, tikv-raft, tikv-wal)"},
		{"same count, another name", record(t), withStorageVolumes(targetTC(2, true), "wal"), "mount 2 (tikv, tikv-wal)"},
		{"the storage volume's claim prefix given as its name", record(t), withStorageVolumes(targetTC(2, true), "tikv-raft"), "(tikv, tikv-tikv-raft)"},
		{"one backed-up member without the storage volume", dropVolume(record(t), "vol-old-5-tikv-raft"), withStorageVolumes(targetTC(2, true), "raft"),
			"the backed-up TiKV member 5 had 1 volumes (tikv)"},
		{"a backup without claims", func() *meta.Record { r := record(t); r.Kubernetes.PVs = nil; return r }(), targetTC(2, true), "records no PVs/PVCs"},
	} {
		err := CheckLayout(tt.rec, tt.tc)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.name, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.err)
		case tt.err != "" && !errors.Is(err, ErrVolumeLayout) && !errors.Is(err, ErrRebuild):
			t.Errorf("%s: error %v is neither ErrVolumeLayout nor ErrRebuild", tt.name, err)
		}
	}
}

func TestCheckClaims(t *testing.T) {
	names := []string{"tikv-restored-tikv-0", "tikv-restored-tikv-1"}
	claim := func(name, volume string, labels map[string]string) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "dst", Labels: labels},
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: volume}}
	}
	ours := func(name string) *corev1.PersistentVolumeClaim {
		return claim(name, PVName("ruid-1", "dst", name), map[string]string{LabelRestore: "ruid-1"})
	}
	byName := func(cs ...*corev1.PersistentVolumeClaim) map[string]*corev1.PersistentVolumeClaim {
		out := map[string]*corev1.PersistentVolumeClaim{}
		for _, c := range cs {
			out[c.Name] = c
		}
		return out
	}
	deleting := claim("tikv-restored-tikv-0", "pv-old", nil)
	deleting.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
	for _, tt := range []struct {
		name     string
		existing map[string]*corev1.PersistentVolumeClaim
		err      []string // each in the message; none accepts
	}{
		{"no claim yet", byName(), nil},
		{"claims of other names are not in the way", byName(claim("tikv-other-tikv-0", "pv-x", nil), claim("data-restored-tidb-0", "pv-y", nil)), nil},
		{"this restore's own claims, bound to its volumes (a repeated reconcile)", byName(ours("tikv-restored-tikv-0"), ours("tikv-restored-tikv-1")), nil},
		{"a claim bound to another volume", byName(claim("tikv-restored-tikv-1", "pvc-0f3a", nil)),
			[]string{"dst/tikv-restored-tikv-1 (bound to volume pvc-0f3a)", "delete them"}},
		{"a claim not bound yet", byName(claim("tikv-restored-tikv-0", "", nil)), []string{"dst/tikv-restored-tikv-0 (not bound)"}},
		{"a claim labelled with this restore but bound to another volume", byName(claim("tikv-restored-tikv-0", "pv-forged", map[string]string{LabelRestore: "ruid-1"})),
			[]string{"dst/tikv-restored-tikv-0 (bound to volume pv-forged, made by restore ruid-1)"}},
		{"another restore's claim (a complete restore's: the TidbCluster's data now)", byName(claim("tikv-restored-tikv-0", PVName("ruid-0", "dst", "tikv-restored-tikv-0"), map[string]string{LabelRestore: "ruid-0"})),
			[]string{"made by restore ruid-0"}},
		{"a claim being deleted is still in the way", byName(deleting), []string{"being deleted"}},
		{"every conflict is named", byName(claim("tikv-restored-tikv-0", "a", nil), claim("tikv-restored-tikv-1", "b", nil)),
			[]string{"dst/tikv-restored-tikv-0 (bound to volume a), dst/tikv-restored-tikv-1 (bound to volume b)"}},
	} {
		err := CheckClaims(names, tt.existing, "ruid-1", "dst")
		if len(tt.err) == 0 {
			if err != nil {
				t.Errorf("%s: refused: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrClaimConflict) {
			t.Errorf("%s: error %v, want ErrClaimConflict", tt.name, err)
			continue
		}
		for _, s := range tt.err {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, s)
			}
		}
	}
}

// TestPlanRefusesAnUnsafeTarget: a target whose TiKV would not run on the restored volumes is
// refused with its reason as soon as restore-volumes reported the backup, before it creates any
// volume (it waits for TargetChecked) or, when it shows up later, before any PV or claim.
func TestPlanRefusesAnUnsafeTarget(t *testing.T) {
	withBackup := backupReported(reportedBackup(t, record(t), restorevolumes.PhaseAwaitingCheck))
	foreign := func(name string) func(*Observed) {
		return func(o *Observed) {
			o.TargetClaims[name] = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "dst"},
				Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-0f3a"}}
		}
	}
	volumesRestored := func(o *Observed) {
		o.RestoreVolumes = job.State{Name: rvName, Phase: job.Succeeded}
		o.Report = rreport(map[string]string{job.StepRestoreVolumes: `{"phase":"Completed","done":4,"total":4}`,
			job.StepRestoreVolumes + ".result": `{"restoreID":"ruid-1","volumes":[]}`})
		o.RestoreMeta = record(t)
	}
	noJob := func(t *testing.T, r Result) {
		for _, a := range r.Actions {
			if a.Kind == CreateJob || a.Kind == CreatePV || a.Kind == CreatePVC {
				t.Errorf("%s planned for an unsafe target", a)
			}
		}
		if condition.IsTrue(r.Status.Conditions, dpv1alpha1.RestoreMemberTargetCheckedCondition) {
			t.Errorf("the step was let go on into an unsafe target: %+v", r.Status.Conditions)
		}
	}
	member := func() *dpv1alpha1.VolumeRestoreMember { return rmember(dpv1alpha1.RestoreMemberRestoreVolume) }
	for _, tt := range []struct {
		name string
		o    Observed
		want rwant
	}{
		{
			name: "a claim of the name a restored claim needs, bound to another volume",
			o:    robs(member(), targetTC(2, true), withBackup, foreign("tikv-raft-restored-tikv-1")),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberClaimConflictReason}, phase: PhaseFailed,
				msg: "dst/tikv-raft-restored-tikv-1 (bound to volume pvc-0f3a)", check: noJob},
		},
		{
			name: "the target's TiKV lacks a backed-up storage volume",
			o:    robs(member(), withStorageVolumes(targetTC(2, true)), withBackup),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberVolumeLayoutMismatchReason}, phase: PhaseFailed,
				msg: "spec.tikv.storageVolumes", check: noJob},
		},
		{
			name: "the target's TiKV has a storage volume the backup lacks",
			o:    robs(member(), withStorageVolumes(targetTC(2, true), "raft", "wal"), withBackup),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberVolumeLayoutMismatchReason}, msg: "tikv-wal", check: noJob},
		},
		{
			name: "a backup whose claims cannot be rebuilt is refused before its volumes are made",
			o: robs(member(), targetTC(2, true), func(o *Observed) {
				rec := record(t)
				rec.Kubernetes.PVs = nil
				backupReported(reportedBackup(t, rec, restorevolumes.PhaseAwaitingCheck))(o)
			}),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberInvalidBackupReason}, msg: "cannot be rebuilt", check: noJob},
		},
		{
			name: "the namespace's claims not read: wait, refuse nothing, create nothing",
			o:    robs(member(), targetTC(2, true), withBackup, func(o *Observed) { o.TargetClaims = nil }),
			want: rwant{check: func(t *testing.T, r Result) {
				noJob(t, r)
				if isTrue(&dpv1alpha1.VolumeRestoreMember{Status: r.Status}, dpv1alpha1.RestoreMemberFailedCondition) {
					t.Errorf("failed: %+v", r.Status.Conditions)
				}
			}},
		},
		{
			name: "a claim that appeared while the volumes were made: refused before any PV",
			o:    robs(member(), targetTC(2, true), volumesRestored, foreign("tikv-restored-tikv-0")),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberClaimConflictReason}, msg: "dst/tikv-restored-tikv-0", check: noJob},
		},
		{
			name: "a storage volume removed from the target while the volumes were made: refused before any PV",
			o:    robs(member(), withStorageVolumes(targetTC(2, true)), volumesRestored),
			want: rwant{reason: map[string]string{dpv1alpha1.RestoreMemberFailedCondition: dpv1alpha1.RestoreMemberVolumeLayoutMismatchReason}, check: noJob},
		},
		{
			name: "this restore's own claims from an earlier pass are no conflict",
			o: robs(member(), targetTC(2, true), volumesRestored, func(o *Observed) {
				claims, err := Rebuild(o.RestoreMeta, Target{TCName: "restored", Namespace: "dst", AZ: "us-west-2b", RestoreID: "ruid-1", Member: "fed-r1", MemberNamespace: "dst"})
				if err != nil {
					t.Fatal(err)
				}
				for _, c := range claims {
					o.PVs[c.PV.Name], o.PVCs[c.PVC.Name], o.TargetClaims[c.PVC.Name] = c.PV, c.PVC, c.PVC
				}
				describeRestored(o)
				operatorTagged(o, claims)
			}),
			want: rwant{actions: []ActionKind{AnnotateTC}, true: []string{dpv1alpha1.RestoreMemberVolumeCompleteCondition}, phase: PhaseVolumeComplete},
		},
	} {
		t.Run(tt.name, func(t *testing.T) { rcheck(t, planned(t, tt.o), tt.want) })
	}
}

// TestCheckEncryption: a backup whose TiKV encrypted its data restores only into a target
// whose spec.tikv.config has the same method and master key (type, and the KMS key id, as
// master-key or as previous-master-key while the key is rotated), whichever form (TOML string
// or map) each side's config takes; a backup without encryption restores anywhere. Each
// refusal names both sides.
func TestCheckEncryption(t *testing.T) {
	const (
		plaintextTOML = `"[security.encryption]\ndata-encryption-method = \"plaintext\"\n"`
		fileTOML      = `"[security.encryption]\ndata-encryption-method = \"aes128-ctr\"\n[security.encryption.master-key]\ntype = \"file\"\npath = \"/etc/tikv/key-a\"\n"`
		fileMap       = `{"security":{"encryption":{"data-encryption-method":"aes128-ctr","master-key":{"type":"file","path":"/keys/other-path"}}}}`
		methodOnly    = `{"security":{"encryption":{"data-encryption-method":"aes256-ctr"}}}`
		rotatedToB    = `{"security":{"encryption":{"data-encryption-method":"aes256-ctr","master-key":{"type":"kms","key-id":"key-b"},"previous-master-key":{"type":"kms","key-id":"key-a"}}}}`
	)
	for _, tt := range []struct {
		name            string
		backup, target  string // spec.tikv.config as JSON; "" absent
		refused         bool
		wantIn, wantErr []string
	}{
		{name: "backup without config, target without", backup: "", target: ""},
		{name: "backup without config, target encrypted", backup: "", target: kmsConfigMap("aes256-ctr", "key-b")},
		{name: "backup plaintext, target without config", backup: plaintextTOML, target: ""},
		{name: "backup plaintext, target encrypted", backup: plaintextTOML, target: kmsConfigTOML("aes256-ctr", "key-b")},
		{name: "backup without encryption section, target encrypted", backup: `"[storage]\nreserve-space = \"0MB\"\n"`, target: kmsConfigMap("aes256-ctr", "key-b")},
		{name: "kms, same key: TOML backup, map target", backup: kmsConfigTOML("aes256-ctr", "key-a"), target: kmsConfigMap("aes256-ctr", "key-a")},
		{name: "kms, same key: map backup, TOML target", backup: kmsConfigMap("aes256-ctr", "key-a"), target: kmsConfigTOML("aes256-ctr", "key-a")},
		{name: "kms, same key, method in another case", backup: kmsConfigTOML("AES256-CTR", "key-a"), target: kmsConfigMap("aes256-ctr", "key-a")},
		{name: "kms, the target rotating from the backup's key", backup: kmsConfigTOML("aes256-ctr", "key-a"), target: rotatedToB},
		{name: "file master key on both sides, other paths", backup: fileTOML, target: fileMap},
		{name: "encrypted backup, target without config", backup: kmsConfigTOML("aes256-ctr", "key-a"), target: "", refused: true,
			wantIn: []string{`data-encryption-method "aes256-ctr"`, "no encryption", "dst/restored"}},
		{name: "encrypted backup, plaintext target", backup: kmsConfigTOML("aes256-ctr", "key-a"), target: plaintextTOML, refused: true,
			wantIn: []string{"aes256-ctr", `"plaintext"`}},
		{name: "another method", backup: kmsConfigTOML("aes256-ctr", "key-a"), target: kmsConfigMap("aes128-ctr", "key-a"), refused: true,
			wantIn: []string{"aes256-ctr", "aes128-ctr"}},
		{name: "kms, another key id", backup: kmsConfigTOML("aes256-ctr", "key-a"), target: kmsConfigMap("aes256-ctr", "key-b"), refused: true,
			wantIn: []string{`kms key-id "key-a"`, `kms key-id "key-b"`}},
		{name: "kms backup, target without a master key", backup: kmsConfigTOML("aes256-ctr", "key-a"), target: methodOnly, refused: true,
			wantIn: []string{`"key-a"`}},
		{name: "kms backup, file target", backup: kmsConfigMap("aes128-ctr", "key-a"), target: fileMap, refused: true,
			wantIn: []string{`kms key-id "key-a"`, `file "/keys/other-path"`}},
		{name: "file backup, kms target", backup: fileTOML, target: kmsConfigMap("aes128-ctr", "key-a"), refused: true,
			wantIn: []string{`file "/etc/tikv/key-a"`, `kms key-id "key-a"`}},
		{name: "encrypted backup, unreadable target config", backup: kmsConfigTOML("aes256-ctr", "key-a"), target: `42`, refused: true,
			wantIn: []string{"spec.tikv.config"}},
		{name: "plaintext backup, unreadable target config: not read", backup: plaintextTOML, target: `42`},
		{name: "unreadable backup config", backup: `"[security"`, target: "", wantErr: []string{"crd_tidb_cluster"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := record(t)
			if tt.backup != "" {
				rec = encryptedRecord(t, tt.backup)
			}
			tc := targetTC(2, true)
			if tt.target != "" {
				withTiKVConfig(tc, tt.target)
			}
			err := CheckEncryption(rec, tc)
			switch {
			case tt.refused:
				if !errors.Is(err, ErrEncryptionMismatch) {
					t.Fatalf("err %v, want ErrEncryptionMismatch", err)
				}
			case tt.wantErr != nil:
				if err == nil || errors.Is(err, ErrEncryptionMismatch) {
					t.Fatalf("err %v, want another error", err)
				}
			case err != nil:
				t.Fatalf("refused: %v", err)
			}
			for _, s := range append(tt.wantIn, tt.wantErr...) {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %s", err, s)
				}
			}
		})
	}
}
