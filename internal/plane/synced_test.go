package plane

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	"github.com/fedbr/fedbr/internal/testenv"
)

// TestReachableOnceTheWatchesSynced: a plane counts as reachable only once the informers its
// OnSynced watches started have filled, so that no reconcile's first read of a member waits for
// an informer's list (issue 44). The plane holds many members, so their list takes a while.
func TestReachableOnceTheWatchesSynced(t *testing.T) {
	ctrllog.SetLogger(logr.Discard())
	env := testenv.Start(t)
	scheme := k8sruntime.NewScheme()
	for _, add := range []func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme, dpv1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tidb"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		m := &dpv1alpha1.VolumeBackupMember{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("fed-b%03d", i), Namespace: "tidb"},
			Spec: dpv1alpha1.VolumeBackupMemberSpec{VolumeBackup: "b", K8sClusterName: "dp1", TCName: "basic", TCNamespace: "tidb", Phase: dpv1alpha1.BackupMemberExecute,
				Template: fedv1alpha1.VolumeBackupMemberSpec{StorageProvider: fedv1alpha1.StorageProvider{S3: &fedv1alpha1.S3StorageProvider{Provider: "aws", Bucket: "b", Prefix: "p"}}}}}
		if err := env.Client.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "planes")
	if err := testenv.WriteKubeconfig(path, map[string]*testenv.Env{"dp1": env}); err != nil {
		t.Fatal(err)
	}
	var informer cache.Informer
	s, err := Load(Options{Kubeconfig: path, Scheme: scheme, Log: logr.Discard(), ProbeInterval: 50 * time.Millisecond,
		OnSynced: func(p *Plane) error {
			// As the manager's watches do: an informer the cache did not have before.
			i, err := p.Cluster.GetCache().GetInformer(ctx, &dpv1alpha1.VolumeBackupMember{}, cache.BlockUntilSynced(false))
			informer = i
			return err
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = s.Start(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	for !s.Reachable()["dp1"] {
		if ctx.Err() != nil {
			t.Fatal("dp1 never became reachable")
		}
		time.Sleep(time.Millisecond)
	}
	if !informer.HasSynced() {
		t.Fatal("dp1 reachable before the members' informer its watch started had synced: a reconcile's first read would wait for its list")
	}
}
