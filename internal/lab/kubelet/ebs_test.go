package kubelet

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// TestEC2 drives the EBS stand-in against the AWS double: a provisioned volume is available and
// tagged, attaching is idempotent and exclusive, detaching is idempotent.
func TestEC2(t *testing.T) {
	aws, err := awsdouble.Open(filepath.Join(t.TempDir(), "aws"), awsdouble.Options{Unlimited: true, VolumeCreateDuration: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(aws)
	t.Cleanup(func() { srv.Close(); _ = aws.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ebs, err := NewEC2(ctx, srv.URL, "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	a, err := aws.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2b"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := aws.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2b"})
	if err != nil {
		t.Fatal(err)
	}
	req := VolumeRequest{Zone: "us-west-2b", SizeGiB: 2, Token: "claim-uid", Tags: map[string]string{"CSIVolumeName": "pvc-claim-uid"}}
	id, err := ebs.CreateVolume(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ebs.CreateVolume(ctx, req); err != nil || again != id {
		t.Errorf("CreateVolume with the same token = %s, %v; want the same volume %s", again, err, id)
	}
	if inv := aws.Inventory(map[string]string{"CSIVolumeName": "pvc-claim-uid"}); len(inv.Volumes) != 1 || inv.Volumes[0].ID != id {
		t.Errorf("tagged volumes = %+v, want %s", inv.Volumes, id)
	}
	admin := AWSAdmin{Endpoint: srv.URL}
	attachedTo := func() string {
		v, err := admin.Volume(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return v.InstanceID
	}
	for range 2 {
		if err := ebs.AttachVolume(ctx, id, a.ID); err != nil {
			t.Fatal(err)
		}
		if got := attachedTo(); got != a.ID {
			t.Fatalf("volume attached to %q, want %s", got, a.ID)
		}
	}
	if err := ebs.AttachVolume(ctx, id, b.ID); err == nil || !strings.Contains(err.Error(), "attached to instance "+a.ID) {
		t.Errorf("attach to a second instance: %v, want a refusal naming %s", err, a.ID)
	}
	// Detaching from an instance the volume is not attached to does nothing.
	if err := ebs.DetachVolume(ctx, id, b.ID); err != nil || attachedTo() != a.ID {
		t.Errorf("detach from the wrong instance: %v, attached to %q", err, attachedTo())
	}
	for range 2 {
		if err := ebs.DetachVolume(ctx, id, a.ID); err != nil {
			t.Fatal(err)
		}
		if got := attachedTo(); got != "" {
			t.Fatalf("volume still attached to %q", got)
		}
	}
	// A second volume on the same instance takes the next device name.
	id2, err := ebs.CreateVolume(ctx, VolumeRequest{Zone: "us-west-2b", SizeGiB: 1, Token: "other"})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{id, id2} {
		if err := ebs.AttachVolume(ctx, v, a.ID); err != nil {
			t.Fatalf("attach %s: %v", v, err)
		}
	}
}
