package env

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/fedbr/fedbr/internal/lab/kubelet"
)

// fieldManager owns what the lab applies.
const fieldManager = "fedbr-lab"

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// clusterConfig is the admin client configuration of one context of a kubeconfig, with a rate
// limit generous enough for setting up a cluster.
func clusterConfig(kubeconfig, context string) (*rest.Config, error) {
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return nil, err
	}
	if raw.Contexts[context] == nil {
		return nil, fmt.Errorf("no cluster %q in %s", context, kubeconfig)
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, context, nil, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %s of %s: %w", context, kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// Config returns the admin client configuration of a lab cluster.
func (l *Lab) Config(cluster string) (*rest.Config, error) {
	return clusterConfig(l.Kubeconfig, cluster)
}

// install applies every CRD manifest of crdDir (server-side: they are too large for the
// last-applied annotation), the members' status guard and the lab StorageClass, and waits
// until the CRDs are established.
func install(ctx context.Context, cfg *rest.Config, crdDirs []string, storageClass string) error {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	var files []string
	for _, dir := range crdDirs {
		f, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil {
			return err
		}
		files = append(files, f...)
	}
	names := make([]string, len(files))
	var applies []func() error
	for i, f := range files {
		applies = append(applies, func() error {
			var err error
			names[i], err = applyCRD(ctx, dyn, f)
			return err
		})
	}
	if err := parallel(applies...); err != nil {
		return err
	}
	if err := applyStatusGuard(ctx, dyn); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := applyStorageClass(ctx, cs, storageClass); err != nil {
		return err
	}
	return waitEstablished(ctx, dyn, names)
}

func applyCRD(ctx context.Context, dyn dynamic.Interface, file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &obj.Object); err != nil {
		return "", fmt.Errorf("%s: %w", file, err)
	}
	if obj.GetKind() != "CustomResourceDefinition" {
		return "", fmt.Errorf("%s: a %q, want a CustomResourceDefinition", file, obj.GetKind())
	}
	body, err := json.Marshal(obj.Object)
	if err != nil {
		return "", err
	}
	if _, err := dyn.Resource(crdGVR).Patch(ctx, obj.GetName(), types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)}); err != nil {
		return "", fmt.Errorf("apply CRD %s from %s: %w", obj.GetName(), file, err)
	}
	return obj.GetName(), nil
}

// StorageClassFor is the lab's default StorageClass: the EBS CSI driver's, bound when the first
// pod is scheduled (WaitForFirstConsumer), so the node that runs the pod provisions the
// volume in its zone and attaches it to its instance.
func StorageClassFor(name string) *storagev1.StorageClass {
	return &storagev1.StorageClass{
		TypeMeta: metav1.TypeMeta{APIVersion: "storage.k8s.io/v1", Kind: "StorageClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       kubelet.EBSDriver,
		Parameters:        map[string]string{"type": "gp3", "csi.storage.k8s.io/fstype": "ext4"},
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
}

func applyStorageClass(ctx context.Context, cs kubernetes.Interface, name string) error {
	body, err := json.Marshal(StorageClassFor(name))
	if err != nil {
		return err
	}
	if _, err := cs.StorageV1().StorageClasses().Patch(ctx, name, types.ApplyPatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager, Force: ptr.To(true)}); err != nil {
		return fmt.Errorf("apply StorageClass %s: %w", name, err)
	}
	return nil
}

func waitEstablished(ctx context.Context, dyn dynamic.Interface, names []string) error {
	return poll(ctx, time.Minute, func() (bool, string, error) {
		for _, n := range names {
			crd, err := dyn.Resource(crdGVR).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			established := false
			for _, c := range conds {
				m, _ := c.(map[string]any)
				established = established || (m["type"] == "Established" && m["status"] == "True")
			}
			if !established {
				return false, "CRD " + n + " not established", nil
			}
		}
		return true, "", nil
	})
}

// waitNodes waits until every node is Ready and has no taint (the node lifecycle controller
// lifts the not-ready taint the API server puts on a new node), so pods schedule at once.
func waitNodes(ctx context.Context, cfg *rest.Config, nodes []Node, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return poll(ctx, timeout, func() (bool, string, error) {
		for _, n := range nodes {
			if !n.Process.Running() {
				return false, "", fmt.Errorf("node %s exited: %s", n.Name, n.Process.LogTail(5))
			}
			nd, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, "node " + n.Name + ": " + err.Error(), nil
			}
			ready := false
			for _, c := range nd.Status.Conditions {
				ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
			}
			if !ready || len(nd.Spec.Taints) > 0 {
				var taints []string
				for _, t := range nd.Spec.Taints {
					taints = append(taints, t.Key)
				}
				return false, fmt.Sprintf("node %s ready=%v taints=[%s]", n.Name, ready, strings.Join(taints, ",")), nil
			}
		}
		return true, "", nil
	})
}

// poll calls f every 100 ms until it is done, fails, or timeout passes; the error then says
// what f last waited for.
func poll(ctx context.Context, timeout time.Duration, f func() (done bool, waiting string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		done, waiting, err := f()
		if err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %s: %s", timeout, waiting)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
