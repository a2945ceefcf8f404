package meta

import (
	"strings"
	"testing"
)

func TestParseOwner(t *testing.T) {
	good := "0b8f5d2e-6a1c-4a47-9b1e-2f0c8d7e6a51/tidb-prod"
	o, err := ParseOwner(good)
	if err != nil {
		t.Fatal(err)
	}
	if o.Cluster != "0b8f5d2e-6a1c-4a47-9b1e-2f0c8d7e6a51" || o.Namespace != "tidb-prod" || o.String() != good {
		t.Errorf("ParseOwner(%q) = %+v", good, o)
	}
	for _, bad := range []string{"", "uid", "/ns", "uid/", "uid/Ns", "uid/ns/x", "u id/ns", strings.Repeat("a", 65) + "/ns",
		"uid/" + strings.Repeat("n", 64)} {
		if o, err := ParseOwner(bad); err == nil {
			t.Errorf("ParseOwner(%q) = %+v, want an error", bad, o)
		}
	}
}

func TestPendingTags(t *testing.T) {
	if PendingBackupTags(nil) != nil || PendingRestoreTags(nil) != nil {
		t.Error("pending tags without an owner")
	}
	o := &Owner{Cluster: "c1", Namespace: "ns"}
	if got := PendingBackupTags(o)[TagBackupPending]; got != "c1/ns" {
		t.Errorf("backup pending tag %q", got)
	}
	if got := PendingRestoreTags(o)[TagRestorePending]; got != "c1/ns" {
		t.Errorf("restore pending tag %q", got)
	}
}

func TestNamespaceTags(t *testing.T) {
	if NamespaceTags(nil) != nil {
		t.Error("namespace tags without an owner")
	}
	got := NamespaceTags(&Owner{Cluster: "c1", Namespace: "tenant-a"})
	if len(got) != 1 || got[TagNamespace] != "tenant-a" {
		t.Errorf("namespace tags = %v, want only %s=tenant-a", got, TagNamespace)
	}
}
