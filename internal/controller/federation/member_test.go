package federation

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
)

func TestOwnerLabelsRoundTrip(t *testing.T) {
	owner := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly", Namespace: "ops", UID: "u1"}}
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: NewMeta(owner, "fed-nightly", "tidb", now)}
	if got := OwnerRequest(m); len(got) != 1 || got[0].Name != "nightly" || got[0].Namespace != "ops" {
		t.Errorf("OwnerRequest = %v", got)
	}
	if err := CheckOwner(m, owner, "dp1"); err != nil {
		t.Errorf("own member refused: %v", err)
	}
	if got := PhaseSince(m); !got.Equal(now) {
		t.Errorf("PhaseSince = %v, want %v", got, now)
	}
	other := owner.DeepCopy()
	other.UID = "u2"
	err := CheckOwner(m, other, "dp1")
	if err == nil || !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("foreign member: err = %v, want a terminal error", err)
	}
	if got := OwnerRequest(&dpv1alpha1.VolumeBackupMember{}); got != nil {
		t.Errorf("unlabelled member maps to %v", got)
	}
	if got := PhaseSince(&dpv1alpha1.VolumeBackupMember{}); !got.IsZero() {
		t.Errorf("no annotation: PhaseSince = %v", got)
	}
}

func TestMessage(t *testing.T) {
	failed := metav1.Condition{Type: "Failed", Status: metav1.ConditionTrue, Message: "boom"}
	ready := metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Message: "working"}
	for _, tc := range []struct {
		name string
		cs   []metav1.Condition
		want string
	}{
		{"failure wins", []metav1.Condition{ready, failed}, "boom"},
		{"ready otherwise", []metav1.Condition{ready}, "working"},
		{"a False failure is not one", []metav1.Condition{{Type: "Failed", Status: metav1.ConditionFalse, Message: "old"}, ready}, "working"},
		{"fallback", nil, "Running"},
	} {
		if got := Message(tc.cs, "Failed", "Ready", "Running"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestCreateSaysWhetherItCreated: a member an earlier plan already created (the cache had not
// shown it yet) is success, but not a creation: the caller's MemberCreated Event is not sent
// twice.
func TestCreateSaysWhetherItCreated(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := dpv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	for i, want := range []bool{true, false} {
		m := &dpv1alpha1.VolumeRestoreMember{ObjectMeta: metav1.ObjectMeta{Name: "fed-r1", Namespace: "tidb"}}
		created, err := Create(context.Background(), c, m)
		if err != nil || created != want {
			t.Errorf("create #%d: created %v, err %v; want %v, nil", i+1, created, err, want)
		}
	}
}

// CutMessage keeps a message the API takes as it is and cuts a longer one to the limit at a
// rune boundary: the cut message is valid UTF-8, within the limit, and ends in "…".
func TestCutMessage(t *testing.T) {
	if m := "member in dp1 failed: X: short"; CutMessage(m) != m {
		t.Errorf("CutMessage changed %q", m)
	}
	exact := strings.Repeat("a", MaxConditionMessage)
	if CutMessage(exact) != exact {
		t.Error("a message of exactly the limit was cut")
	}
	// "member in dp1 failed: R: " and a member's 32 KiB of three-byte runes.
	long := "member in dp1 failed: R: " + strings.Repeat("界", MaxConditionMessage/3)
	got := CutMessage(long)
	if len(got) > MaxConditionMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "member in dp1 failed: R: 界") {
		t.Errorf("CutMessage of %d bytes: %d bytes, valid %v, ends %q", len(long), len(got), utf8.ValidString(got), got[len(got)-6:])
	}
}
