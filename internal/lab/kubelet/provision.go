package kubelet

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// Annotations of dynamic provisioning, as the scheduler, the PV controller and the external
// provisioner use them.
const (
	// AnnSelectedNode is set on a claim of a WaitForFirstConsumer class by the scheduler once
	// it has picked the node of the claim's first pod.
	AnnSelectedNode = "volume.kubernetes.io/selected-node"
	// AnnStorageProvisioner is set by the PV controller on a claim it leaves to an external
	// provisioner.
	AnnStorageProvisioner = "volume.kubernetes.io/storage-provisioner"
	// AnnBetaStorageProvisioner is the older spelling the PV controller still sets.
	AnnBetaStorageProvisioner = "volume.beta.kubernetes.io/storage-provisioner"
	// AnnProvisionedBy marks a PV made by a provisioner.
	AnnProvisionedBy = "pv.kubernetes.io/provisioned-by"
)

// provisionRetry bounds the backoff of a claim whose volume could not be made.
const provisionRetry = 5 * time.Second

// NeedsVolume reports whether node must provision a volume for the claim: it is unbound, the
// PV controller left it to the EBS CSI driver, and the scheduler picked this node for its first
// pod. Each lab node provisions the claims of its own pods, in its own zone, so the volume
// can be attached to its instance — what the EBS CSI controller does for the node a
// WaitForFirstConsumer claim selected.
func NeedsVolume(pvc *corev1.PersistentVolumeClaim, node string) bool {
	if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil || pvc.Annotations[AnnSelectedNode] != node {
		return false
	}
	p := pvc.Annotations[AnnStorageProvisioner]
	if p == "" {
		p = pvc.Annotations[AnnBetaStorageProvisioner]
	}
	return p == EBSDriver
}

// VolumeSizeGiB is the claim's storage request rounded up to whole GiB (EBS sizes), at least 1.
func VolumeSizeGiB(pvc *corev1.PersistentVolumeClaim) int32 {
	q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		return 1
	}
	const gib = 1 << 30
	n := (q.Value() + gib - 1) / gib
	return int32(max(1, min(n, 65536)))
}

// ProvisionedPV is the PersistentVolume for a claim's new EBS volume: a CSI volume of driver
// ebs.csi.aws.com with the volume id as handle, pinned to the zone, pre-bound to the claim
// (by UID, so a recreated claim of the same name does not take it) with the class's reclaim
// policy. It is named pvc-<claim uid>, as the external provisioner names it.
func ProvisionedPV(pvc *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, volumeID, zone string) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if class.ReclaimPolicy != nil {
		reclaim = *class.ReclaimPolicy
	}
	fsType := class.Parameters["csi.storage.k8s.io/fstype"]
	if fsType == "" {
		fsType = "ext4"
	}
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "pvc-" + string(pvc.UID),
			Annotations: map[string]string{AnnProvisionedBy: EBSDriver},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: *resource.NewQuantity(int64(VolumeSizeGiB(pvc))<<30, resource.BinarySI)},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              class.Name,
			MountOptions:                  class.MountOptions,
			VolumeMode:                    pvc.Spec.VolumeMode,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID, ResourceVersion: pvc.ResourceVersion},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: EBSDriver, VolumeHandle: volumeID, FSType: fsType}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: ZoneLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
	}
}

// provisioner makes the volumes of claims whose first pod the scheduler put on this node.
type provisioner struct {
	o       Options
	factory informers.SharedInformerFactory
	queue   workqueue.TypedRateLimitingInterface[string]
}

func newProvisioner(o Options, factory informers.SharedInformerFactory) *provisioner {
	p := &provisioner{o: o, factory: factory, queue: workqueue.NewTypedRateLimitingQueue(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, provisionRetry))}
	enqueue := func(obj any) {
		if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && NeedsVolume(pvc, o.Name) {
			p.queue.Add(pvc.Namespace + "/" + pvc.Name)
		}
	}
	_, _ = factory.Core().V1().PersistentVolumeClaims().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	factory.Storage().V1().StorageClasses().Informer()
	return p
}

// run works the queue until ctx ends.
func (p *provisioner) run(ctx context.Context) {
	go func() {
		<-ctx.Done()
		p.queue.ShutDown()
	}()
	for {
		key, shutdown := p.queue.Get()
		if shutdown {
			return
		}
		if err := p.provision(ctx, key); err != nil {
			klog.FromContext(ctx).Error(err, "Provisioning volume failed; retrying", "claim", key)
			p.queue.AddRateLimited(key)
		} else {
			p.queue.Forget(key)
		}
		p.queue.Done(key)
	}
}

func (p *provisioner) provision(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := p.factory.Core().V1().PersistentVolumeClaims().Lister().PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if !NeedsVolume(pvc, p.o.Name) {
		return nil
	}
	className := ""
	if pvc.Spec.StorageClassName != nil {
		className = *pvc.Spec.StorageClassName
	}
	class, err := p.factory.Storage().V1().StorageClasses().Lister().Get(className)
	if err != nil {
		return fmt.Errorf("storage class %q of claim %s: %w", className, key, err)
	}
	pvName := "pvc-" + string(pvc.UID)
	if _, err := p.o.Client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{}); err == nil {
		return nil // made already; the PV controller binds it
	}
	id, err := p.o.EBS.CreateVolume(ctx, VolumeRequest{
		Zone: p.o.Zone, SizeGiB: VolumeSizeGiB(pvc), Type: class.Parameters["type"], Token: string(pvc.UID),
		Tags: map[string]string{
			"CSIVolumeName":                           pvName,
			"kubernetes.io/created-for/pvc/name":      pvc.Name,
			"kubernetes.io/created-for/pvc/namespace": pvc.Namespace,
			"kubernetes.io/created-for/pv/name":       pvName,
		},
	})
	if err != nil {
		return err
	}
	pv := ProvisionedPV(pvc, class, id, p.o.Zone)
	if _, err := p.o.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create PV %s for claim %s: %w", pvName, key, err)
	}
	klog.FromContext(ctx).Info("Provisioned volume", "claim", key, "volume", id, "pv", pvName, "zone", p.o.Zone)
	return nil
}
