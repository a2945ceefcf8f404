package apply

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/fedbr/fedbr/internal/agent/job"
)

func TestMapOwner(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Annotations: map[string]string{job.AnnotationOwner: "VolumeBackupMember/fed-b1"}}}
	if r := MapOwner("VolumeBackupMember")(context.Background(), cm); len(r) != 1 || r[0].Name != "fed-b1" || r[0].Namespace != "ns" {
		t.Errorf("requests %v", r)
	}
	if r := MapOwner("VolumeRestoreMember")(context.Background(), cm); len(r) != 0 {
		t.Errorf("another kind's object mapped: %v", r)
	}
	if r := MapOwner("VolumeBackupMember")(context.Background(), &corev1.ConfigMap{}); len(r) != 0 {
		t.Errorf("foreign object mapped: %v", r)
	}
}
