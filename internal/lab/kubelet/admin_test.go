package kubelet

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

func TestAWSAdmin(t *testing.T) {
	aws, err := awsdouble.Open(t.TempDir(), awsdouble.Options{Unlimited: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(aws)
	t.Cleanup(func() { srv.Close(); _ = aws.Close() })
	admin := AWSAdmin{Endpoint: srv.URL}
	ctx := context.Background()

	id, err := admin.CreateInstance(ctx, "us-west-2b", map[string]string{"Name": "n1"})
	if err != nil || !strings.HasPrefix(id, "i-") {
		t.Fatalf("CreateInstance = %q, %v", id, err)
	}
	inst, err := aws.CreateInstance(awsdouble.InstanceSpec{AZ: "us-west-2a", Volumes: []awsdouble.VolumeSpec{{Device: "/dev/xvdb", SizeGiB: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	v, err := admin.Volume(ctx, inst.Volumes[0].ID)
	if err != nil || v.Dir != inst.Volumes[0].Dir || v.InstanceID != inst.ID {
		t.Errorf("Volume = %+v, %v; want dir %s on %s", v, err, inst.Volumes[0].Dir, inst.ID)
	}
	if _, err := admin.Volume(ctx, "vol-nope"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("Volume(unknown) = %v, want a not-found error", err)
	}
	if _, err := admin.CreateInstance(ctx, "eu-north-1a", nil); err == nil {
		t.Error("CreateInstance in a zone outside the region succeeded")
	}
}
