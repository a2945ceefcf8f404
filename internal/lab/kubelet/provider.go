package kubelet

import (
	"context"
	"net"
	"net/url"
	"sort"
	"sync"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/klog/v2"

	"github.com/fedbr/fedbr/internal/lab/loopfs"
)

// provider is the virtual-kubelet pod provider: it keeps one podRun per pod and reports
// their statuses through the notifier callback.
type provider struct {
	o Options
	// ctx lives as long as the node runs pods; pod goroutines use it for API calls.
	ctx context.Context

	// lister sees the pods bound to this node; set before the pod controller starts.
	lister corev1listers.PodLister

	mu     sync.Mutex
	pods   map[string]*podRun
	wg     sync.WaitGroup
	notify func(*corev1.Pod)
	dirty  map[string]bool
	kick   chan struct{}

	// stageMu serializes staging and unstaging image volumes (pods of one claim race).
	stageMu sync.Mutex
	// blocks are the images of the raw block claims attached (stageBlock), by volume id.
	blocks map[string]string
}

func newProvider(ctx context.Context, o Options) *provider {
	return &provider{o: o, ctx: ctx, pods: map[string]*podRun{}, dirty: map[string]bool{}, kick: make(chan struct{}, 1)}
}

// CreatePod starts running a pod; it returns at once and reports progress by status.
func (p *provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	key := pod.Namespace + "/" + pod.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.pods[key]; ok && old.spec.UID == pod.UID {
		return nil
	}
	r := newPodRun(p, pod)
	p.pods[key] = r
	klog.FromContext(p.ctx).V(1).Info("Starting pod", "pod", klog.KObj(pod))
	p.wg.Go(func() {
		r.run(p.ctx)
		r.finish(p.ctx)
		r.mu.Lock()
		deleting := r.deleting
		r.mu.Unlock()
		if deleting {
			p.forget(r)
		}
		// A pod that ran to its end holds no volume any more, deleted or not: the attach-detach
		// controller leaves terminated pods out, so the claim's next pod may attach it elsewhere.
		p.detach(r)
	})
	p.changedLocked(key)
	return nil
}

// UpdatePod applies label, annotation and activeDeadlineSeconds changes.
func (p *provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	r := p.get(pod.Namespace, pod.Name)
	if r == nil {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	r.update(pod)
	p.changed(r.key)
	return nil
}

// DeletePod starts terminating a pod with its grace period and returns; the pod object is
// removed once its processes are gone.
func (p *provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	r := p.get(pod.Namespace, pod.Name)
	if r == nil || r.spec.UID != pod.UID {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	select {
	case <-r.done:
		// Already finished: forget it now.
		p.forget(r)
		p.detach(r)
		return nil
	default:
	}
	r.mu.Lock()
	r.deleting = true
	r.mu.Unlock()
	r.stop(r.gracePeriod(pod), "", "")
	p.changed(r.key)
	return nil
}

// detach detaches the EBS volumes of a finished or deleted pod that no running pod on the node
// uses, as the attach-detach controller does once a volume's last running pod on a node is
// gone, so the claim's next pod can attach it elsewhere. A failure is logged: the volume then
// stays attached, as on EKS when a detach fails.
func (p *provider) detach(gone *podRun) {
	if p.o.EBS == nil {
		return
	}
	gone.mu.Lock()
	vols := append([]string(nil), gone.ebsVolumes...)
	gone.mu.Unlock()
	inUse := map[string]bool{}
	p.mu.Lock()
	for _, r := range p.pods {
		select {
		case <-r.done:
			continue // ran to its end: its volumes are free
		default:
		}
		r.mu.Lock()
		for _, v := range r.ebsVolumes {
			inUse[v] = true
		}
		r.mu.Unlock()
	}
	p.mu.Unlock()
	for _, v := range vols {
		if inUse[v] {
			continue
		}
		if err := p.unstage(v); err != nil {
			klog.FromContext(p.ctx).Error(err, "Unmounting volume failed; it stays attached", "volume", v, "pod", gone.key)
			continue
		}
		if err := p.o.EBS.DetachVolume(p.ctx, v, p.o.InstanceID); err != nil {
			klog.FromContext(p.ctx).Error(err, "Detaching volume failed", "volume", v, "pod", gone.key)
		}
	}
}

func (p *provider) forget(r *podRun) {
	p.mu.Lock()
	if p.pods[r.key] == r {
		delete(p.pods, r.key)
	}
	p.mu.Unlock()
}

func (p *provider) get(ns, name string) *podRun {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pods[ns+"/"+name]
}

// GetPod returns the pod as the provider runs it. A run of an older pod with the same name
// (a StatefulSet pod being replaced) does not count once the API has the new pod: the pod
// controller would otherwise take the new pod for the old one and never create it.
func (p *provider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	r := p.get(ns, name)
	if r == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", ns, name)
	}
	if p.lister != nil {
		if cur, err := p.lister.Pods(ns).Get(name); err == nil && cur.UID != r.spec.UID {
			return nil, errdefs.NotFoundf("pod %s/%s with uid %s is not on this node", ns, name, cur.UID)
		}
	}
	return r.snapshot(), nil
}

// GetPodStatus returns the pod's status.
func (p *provider) GetPodStatus(ctx context.Context, ns, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods lists the pods on this node.
func (p *provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.snapshot())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out, nil
}

// NotifyPods registers the pod controller's status callback.
func (p *provider) NotifyPods(_ context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
}

// changed marks a pod's status for delivery. A single loop delivers the current status of
// each marked pod, so a newer status never loses to an older one.
func (p *provider) changed(key string) {
	p.mu.Lock()
	p.changedLocked(key)
	p.mu.Unlock()
}

func (p *provider) changedLocked(key string) {
	p.dirty[key] = true
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// deliver runs until ctx ends, sending marked pods' statuses to the pod controller.
func (p *provider) deliver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.kick:
		}
		p.mu.Lock()
		notify := p.notify
		var runs []*podRun
		for key := range p.dirty {
			if r, ok := p.pods[key]; ok {
				runs = append(runs, r)
			}
		}
		if notify == nil {
			p.mu.Unlock()
			continue
		}
		clear(p.dirty)
		p.mu.Unlock()
		for _, r := range runs {
			notify(r.snapshot())
		}
	}
}

// stopAll terminates every pod (node shutdown) with at most the given grace period and
// waits until their processes are gone.
func (p *provider) stopAll(grace time.Duration) {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	for _, r := range runs {
		r.stop(min(grace, r.gracePeriod(r.spec)), "", "")
	}
	p.wg.Wait()
	// A node that goes away leaves its volumes attached but no longer mounted.
	if err := loopfs.UnmountUnder(p.stagingDir()); err != nil {
		klog.FromContext(p.ctx).Error(err, "Unmounting the node's volumes failed")
	}
}

// apiHostPort is the API server address given to pods as KUBERNETES_SERVICE_HOST/PORT.
func (p *provider) apiHostPort() (string, string) {
	if p.o.Server == "" {
		return "", ""
	}
	u, err := url.Parse(p.o.Server)
	if err != nil {
		return "", ""
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		return u.Host, "443"
	}
	return host, port
}
