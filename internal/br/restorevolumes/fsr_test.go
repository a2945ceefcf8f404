package restorevolumes_test

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/br/restorevolumes"
	"github.com/fedbr/fedbr/internal/cloud"
	"github.com/fedbr/fedbr/internal/lab/awsdouble"
	"github.com/fedbr/fedbr/internal/meta"
)

// TestPlanFSR: the largest snapshots get FSR first (ties by id) within the places of the quota
// that other snapshots of the account do not take; a candidate already enabled takes no new
// place; a snapshot over 16 TiB never gets it.
func TestPlanFSR(t *testing.T) {
	c := func(id string, gib int32) restorevolumes.FSRCandidate {
		return restorevolumes.FSRCandidate{SnapshotID: id, SizeGiB: gib}
	}
	tests := []struct {
		name    string
		cands   []restorevolumes.FSRCandidate
		quota   int
		enabled []string
		with    []string
		without []string
	}{
		{"room for all", []restorevolumes.FSRCandidate{c("a", 10), c("b", 20)}, 5, nil, []string{"b", "a"}, nil},
		{"largest first", []restorevolumes.FSRCandidate{c("a", 10), c("b", 30), c("c", 20)}, 2, nil, []string{"b", "c"}, []string{"a"}},
		{"ties by id", []restorevolumes.FSRCandidate{c("b", 10), c("a", 10), c("c", 10)}, 2, nil, []string{"a", "b"}, []string{"c"}},
		{"others take places", []restorevolumes.FSRCandidate{c("a", 10), c("b", 20)}, 5, []string{"x1", "x2", "x3", "x4"}, []string{"b"}, []string{"a"}},
		{"quota full", []restorevolumes.FSRCandidate{c("a", 10)}, 5, []string{"x1", "x2", "x3", "x4", "x5"}, nil, []string{"a"}},
		{"already enabled takes no new place", []restorevolumes.FSRCandidate{c("a", 10), c("b", 20)}, 3, []string{"x1", "a"}, []string{"b", "a"}, nil},
		{"over 16 TiB", []restorevolumes.FSRCandidate{c("big", 16*1024+1), c("edge", 16*1024)}, 5, nil, []string{"edge"}, []string{"big"}},
		{"nothing asked", nil, 5, nil, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := restorevolumes.PlanFSR(tt.cands, tt.quota, tt.enabled)
			var without []string
			for _, s := range p.Without {
				without = append(without, s.SnapshotID)
				if s.Reason == "" {
					t.Errorf("%s goes without FSR with no reason", s.SnapshotID)
				}
			}
			if !reflect.DeepEqual(p.With, tt.with) || !reflect.DeepEqual(without, tt.without) {
				t.Fatalf("with %v without %v, want with %v without %v", p.With, without, tt.with, tt.without)
			}
		})
	}
}

// TestRestoreWithFSRBeyondQuota: a restore of more data snapshots than the region's FSR quota
// (AWS's 5, one place taken by another user of the account) with FSR does not fail: the
// largest snapshots that fit get FSR and come out fast-restored, the rest and the one over
// 16 TiB are restored without it, each named with its reason in the result and the status.
// With a quota fedbr believes larger than AWS's, AWS's Unsuccessful answers at run time are
// taken the same way.
func TestRestoreWithFSRBeyondQuota(t *testing.T) {
	const over = 16*1024 + 1
	sizes := []int32{30, 10, 70, 20, 60, 40, 50, over} // 4 places: 70, 60, 50, 40
	tests := []struct {
		name    string
		quota   int    // fedbr's idea of the quota; AWS's is 5
		wantWhy string // in the reason of the small ones without FSR
	}{
		{"planned", 0, "quota of 5 snapshots is full"},
		{"refused at run time", 20, awsdouble.FSRQuotaExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := testContext(t)
			l := newLabSized(t, awsdouble.Options{TimeFactor: 3600}, sizes)
			// Another user of the account holds one place of the quota.
			in, err := l.srv.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}})
			if err != nil {
				t.Fatal(err)
			}
			snaps, err := l.p.SnapshotInstance(ctx, cloud.SnapshotRequest{InstanceID: in.ID, VolumeIDs: []string{in.Volumes[0].ID}})
			if err != nil {
				t.Fatal(err)
			}
			if _, refused, err := l.p.EnableFSR(ctx, "us-west-2c", []string{snaps[0].ID}); err != nil || len(refused) > 0 {
				t.Fatalf("another user's FSR: refused %v, %v", refused, err)
			}
			var last restorevolumes.Status
			res, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1", TargetAZ: "us-west-2b", FSR: true,
				FSRQuota: tt.quota, Report: func(s restorevolumes.Status) { last = s }})
			if err != nil {
				t.Fatalf("restore with FSR of 8 data snapshots: %v", err)
			}
			sizeOf := map[string]int32{}
			var fast []int32
			for _, v := range res.Volumes {
				if v.Type != meta.DataDirType {
					continue
				}
				sizeOf[v.SnapshotID] = v.SizeGiB
				if v.FastRestored {
					fast = append(fast, v.SizeGiB)
				}
			}
			slices.Sort(fast)
			if want := []int32{40, 50, 60, 70}; !reflect.DeepEqual(fast, want) {
				t.Fatalf("fast-restored data volumes of %v GiB, want %v", fast, want)
			}
			if !reflect.DeepEqual(last.WithoutFSR, res.WithoutFSR) {
				t.Fatalf("status says without FSR %v, result %v", last.WithoutFSR, res.WithoutFSR)
			}
			var without []int32
			for _, s := range res.WithoutFSR {
				size := sizeOf[s.SnapshotID]
				without = append(without, size)
				want := tt.wantWhy
				if size == over {
					want = "16 TiB"
				}
				if !strings.Contains(s.Reason, want) {
					t.Errorf("%s (%d GiB) without FSR because %q, want it to say %q", s.SnapshotID, size, s.Reason, want)
				}
			}
			slices.Sort(without)
			if want := []int32{10, 20, 30, over}; !reflect.DeepEqual(without, want) {
				t.Fatalf("without FSR: snapshots of %v GiB, want %v", without, want)
			}
		})
	}
}

// TestFSREnabledByOthersStaysEnabled: a snapshot of the restore whose fast snapshot restore
// another user of the account had turned on in the target AZ before the restore is used, and
// keeps it afterwards; the restore disables only what it enabled itself.
func TestFSREnabledByOthersStaysEnabled(t *testing.T) {
	ctx := testContext(t)
	l := newLabSized(t, awsdouble.Options{TimeFactor: 3600}, []int32{30, 10})
	theirs, ours := l.rec.TiKV.Stores[0].Volumes[0].SnapshotID, l.rec.TiKV.Stores[1].Volumes[0].SnapshotID
	if _, refused, err := l.p.EnableFSR(ctx, "us-west-2b", []string{theirs}); err != nil || len(refused) > 0 {
		t.Fatalf("another user's FSR: refused %v, %v", refused, err)
	}
	res, err := restorevolumes.Run(ctx, l.p, &fakePD{}, l.store, restorevolumes.Options{RestoreID: "r1", TargetAZ: "us-west-2b", FSR: true})
	if err != nil {
		t.Fatalf("restore with FSR: %v", err)
	}
	for _, v := range res.Volumes {
		if v.Type == meta.DataDirType && !v.FastRestored {
			t.Errorf("data volume of %s not fast-restored", v.SnapshotID)
		}
	}
	states, err := l.p.DescribeFSR(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	on := map[string]string{}
	for _, s := range states {
		if s.AZ == "us-west-2b" {
			on[s.SnapshotID] = s.State
		}
	}
	if st := on[theirs]; st == "" || st == "disabling" || st == "disabled" {
		t.Errorf("FSR of %s, which another user had enabled before the restore, is %q after it; want it left on", theirs, st)
	}
	if st := on[ours]; st != "" && st != "disabling" && st != "disabled" {
		t.Errorf("FSR of %s, which the restore enabled, is %q after it; want it disabled", ours, st)
	}
}
