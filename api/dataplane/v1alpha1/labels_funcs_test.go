package v1alpha1

import (
	"maps"
	"testing"
)

func TestOwnedKey(t *testing.T) {
	for key, want := range map[string]bool{
		"fedbr.io/force-remove":                  true,
		"dataplane.fedbr.io/owner-uid":           true,
		"lab.fedbr.io/recovery-mode":             true,
		"federation.pingcap.com/scheduled-at":    true,
		"notfedbr.io/x":                          false, // a domain that merely ends like ours
		"fedbr.io.example.com/x":                 false,
		"eks.amazonaws.com/role-arn":             false,
		"tidb.pingcap.com/backup-schedule":       false,
		"sidecar.istio.io/inject":                false,
		"team":                                   false,
		"fedbr.io":                               false, // no prefix: a bare name
		"app.kubernetes.io/managed-by":           false,
		"dataplane.fedbr.io.evil.example.com/a":  false,
		"x.federation.pingcap.com/anything-else": true,
	} {
		if got := OwnedKey(key); got != want {
			t.Errorf("OwnedKey(%q) = %v, want %v", key, got, want)
		}
	}
}

func TestCarried(t *testing.T) {
	labels := map[string]string{"team": "db", "tidb.pingcap.com/backup-schedule": "nightly",
		LabelOwnerUID: "forged", "dataplane.fedbr.io/member": "forged"}
	if got, want := CarriedLabels(labels), map[string]string{"team": "db", "tidb.pingcap.com/backup-schedule": "nightly"}; !maps.Equal(got, want) {
		t.Errorf("CarriedLabels = %v, want %v", got, want)
	}
	annotations := map[string]string{
		"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/br", "sidecar.istio.io/inject": "false",
		lastApplied: `{"kind":"VolumeBackup"}`, "fedbr.io/force-remove": "true", AnnotationPhaseSince: "2026-01-01T00:00:00Z",
		"federation.pingcap.com/scheduled-at": "2026-01-01T00:00:00Z",
	}
	if got, want := CarriedAnnotations(annotations), map[string]string{"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/br",
		"sidecar.istio.io/inject": "false"}; !maps.Equal(got, want) {
		t.Errorf("CarriedAnnotations = %v, want %v", got, want)
	}
	if got := CarriedLabels(nil); got == nil || len(got) != 0 {
		t.Errorf("CarriedLabels(nil) = %#v, want an empty map to add to", got)
	}
	// The input is never modified.
	if len(labels) != 4 || len(annotations) != 6 {
		t.Errorf("inputs changed: %v %v", labels, annotations)
	}
}
