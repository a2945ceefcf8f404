package demo

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/lab/labdns"
	"github.com/fedbr/fedbr/internal/lab/labtls"
	"github.com/fedbr/fedbr/internal/lab/operator"
	"github.com/fedbr/fedbr/internal/tidb"
)

// setupTLS makes the lab's CA for Options.TLS (labtls): a node certificate valid for every
// member address the demo's TidbClusters can have (the source's and the restore's address
// blocks of every data plane, with one failover TiKV each) and a client certificate, written under the demo's log
// directory; d.tls is the client side the demo itself dials PD and TiKV with.
func (d *Harness) setupTLS() error {
	var hosts []string
	for _, dp := range d.lab.DataPlanes {
		restored, err := env.RestoreBlock(dp)
		if err != nil {
			return err
		}
		for _, prefix := range []string{dp.IPPrefix, restored} {
			a := operator.Addressing{IPPrefix: prefix}
			for i := range 3 {
				hosts = append(hosts, hostOf(a.PD(i)))
			}
			// One more TiKV per plane: a failed-over store's pod (ScenarioFailover), and the
			// restore's TiKV as many.
			for i := range d.o.TiKVPerPlane + 1 {
				hosts = append(hosts, hostOf(a.TiKV(i)))
			}
		}
	}
	set, err := labtls.New(filepath.Join(logDir(d.lab), "tls"), hosts...)
	if err != nil {
		return fmt.Errorf("lab CA: %w", err)
	}
	d.tlsSet = set
	if d.tls, err = tidb.LoadTLS(set.Paths()); err != nil {
		return fmt.Errorf("lab client certificate: %w", err)
	}
	return nil
}

func hostOf(hostPort string) string {
	h, _, _ := net.SplitHostPort(hostPort)
	return h
}

// PDURL is PD's HTTP address as the demo reaches it: https:// with Options.TLS.
func (d *Harness) PDURL(addr string) string { return d.tls.PDURLs([]string{addr})[0] }

// withTLS turns tlsCluster on in tc (Options.TLS; PD addresses https://, as tidb-operator
// writes them) and creates in its namespace of cluster the Secrets a tidb-operator user
// creates for it: the cluster client secret fedbr's steps mount, and each component's
// certificate the lab operator mounts into its pods. Without Options.TLS it does nothing.
func (d *Harness) withTLS(ctx context.Context, cluster string, tc *pcv1alpha1.TidbCluster) error {
	if d.tlsSet == nil {
		return nil
	}
	tc.Spec.TLSCluster = &pcv1alpha1.TLSCluster{Enabled: true}
	for i, a := range tc.Spec.PDAddresses {
		tc.Spec.PDAddresses[i] = "https://" + strings.TrimPrefix(a, "http://")
	}
	s := d.tlsSet
	nodeCert, nodeKey := s.NodeCert, s.NodeKey
	if tc.Spec.ClusterDomain != "" {
		// PD is also reached by its Service's names, as spec.cluster addresses it.
		var err error
		pd := operator.ServiceName(tc.Name)
		if nodeCert, nodeKey, err = s.NodeWith(labdns.ServiceName(pd, tc.Namespace, tc.Spec.ClusterDomain),
			labdns.ServiceName(pd+"-peer", tc.Namespace, tc.Spec.ClusterDomain)); err != nil {
			return err
		}
	}
	for name, data := range map[string][3][]byte{
		job.ClusterClientSecret(tc.Name):                     {s.CA, s.Cert, s.Key},
		operator.NodeSecret(tc.Name, operator.ComponentPD):   {s.CA, nodeCert, nodeKey},
		operator.NodeSecret(tc.Name, operator.ComponentTiKV): {s.CA, nodeCert, nodeKey},
	} {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tc.Namespace},
			Data: map[string][]byte{labtls.CAFile: data[0], corev1.TLSCertKey: data[1], corev1.TLSPrivateKeyKey: data[2]}}
		err := d.kube[cluster].Create(ctx, sec)
		if apierrors.IsAlreadyExists(err) {
			err = d.kube[cluster].Update(ctx, sec)
		}
		if err != nil {
			return fmt.Errorf("secret %s/%s in %s: %w", tc.Namespace, name, cluster, err)
		}
	}
	return nil
}

// tlsSteps are the steps that dial PD or TiKV in every demo run (the lift runs only when a
// pause could not lift).
var tlsSteps = []string{job.StepPause, job.StepSnapshot, job.StepRestoreVolumes, job.StepRestoreData}

// seenPod is what the demo keeps of a step pod: its step, its container's arguments, and when
// its watch first showed it created, bound to a node and running (zero: not seen so).
type seenPod struct {
	step, ns, member            string
	args                        []string
	created, scheduled, running time.Time
}

// recordStepPods watches, until ctx ends, the step pods of the source and restore namespaces
// in every data plane and keeps those of steps that dial PD or TiKV in d.seen. A watch opened
// without a resourceVersion starts with the pods that exist, so one opened again after a drop
// misses only a pod created and deleted in between.
func (d *Harness) recordStepPods(ctx context.Context) {
	d.seenMu.Lock()
	d.seen = map[string]seenPod{}
	d.seenMu.Unlock()
	for _, dp := range d.lab.DataPlanes {
		w, ok := d.kube[dp.Cluster].(client.WithWatch)
		if !ok {
			continue
		}
		for _, ns := range []string{d.o.Namespace, d.o.RestoreNamespace} {
			go watchAlways(ctx, w, &corev1.PodList{}, func(o client.Object) {
				if p, ok := o.(*corev1.Pod); ok {
					d.sawStepPod(dp.Cluster, p, time.Now())
				}
			}, client.InNamespace(ns), client.HasLabels{job.LabelStep})
		}
	}
}

// watchAlways watches list's kind through w until ctx ends, handing every object an event
// carries to saw, and opens the watch again (after a second when it cannot) whenever it drops.
func watchAlways(ctx context.Context, w client.WithWatch, list client.ObjectList, saw func(client.Object), opts ...client.ListOption) {
	for ctx.Err() == nil {
		wi, err := w.Watch(ctx, list, opts...)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range wi.ResultChan() {
			if o, ok := ev.Object.(client.Object); ok {
				saw(o)
			}
		}
		wi.Stop()
	}
}

// sawStepPod keeps p in d.seen if its step dials PD or TiKV; at is when its watch showed it
// (zero when listed afterwards).
func (d *Harness) sawStepPod(plane string, p *corev1.Pod, at time.Time) {
	step := p.Labels[job.LabelStep]
	if !job.DialsCluster(step) || len(p.Spec.Containers) == 0 {
		return
	}
	d.seenMu.Lock()
	defer d.seenMu.Unlock()
	if d.seen == nil {
		d.seen = map[string]seenPod{}
	}
	key := plane + "/" + p.Namespace + "/" + p.Name
	sp := d.seen[key]
	sp.step, sp.ns, sp.member, sp.args = step, p.Namespace, p.Labels[job.LabelMember], slices.Clone(p.Spec.Containers[0].Args)
	if !at.IsZero() {
		first := func(t *time.Time, now bool) {
			if now && t.IsZero() {
				*t = at
			}
		}
		first(&sp.created, true)
		first(&sp.scheduled, p.Spec.NodeName != "")
		first(&sp.running, p.Status.Phase == corev1.PodRunning)
	}
	d.seen[key] = sp
}

// lastStepPod is when the last of the pods of step for member (its label value) in namespace ns (one per data
// plane) was seen created, bound to a node and running; a time is zero when any pod was not
// seen so.
func (d *Harness) lastStepPod(ns, member, step string) (created, scheduled, running time.Time) {
	d.seenMu.Lock()
	defer d.seenMu.Unlock()
	var pods []seenPod
	for _, p := range d.seen {
		if p.step == step && p.ns == ns && p.member == member {
			pods = append(pods, p)
		}
	}
	last := func(of func(seenPod) time.Time) time.Time {
		var t time.Time
		for _, p := range pods {
			if of(p).IsZero() {
				return time.Time{}
			}
			if of(p).After(t) {
				t = of(p)
			}
		}
		return t
	}
	return last(func(p seenPod) time.Time { return p.created }), last(func(p seenPod) time.Time { return p.scheduled }),
		last(func(p seenPod) time.Time { return p.running })
}

// stepTLS counts, by step, the step pods of the source and restore namespaces in every data
// plane — those that exist and those recordStepPods saw — (Report.StepPods) and those whose
// container carried --ca, --cert and --key (Report.StepPodsTLS). With Options.TLS every one of
// tlsSteps must have run and carried them.
func (d *Harness) stepTLS(ctx context.Context) error {
	for _, dp := range d.lab.DataPlanes {
		for _, ns := range []string{d.o.Namespace, d.o.RestoreNamespace} {
			var pods corev1.PodList
			if err := d.kube[dp.Cluster].List(ctx, &pods, client.InNamespace(ns), client.HasLabels{job.LabelStep}); err != nil {
				return fmt.Errorf("step pods in %s/%s: %w", dp.Cluster, ns, err)
			}
			for i := range pods.Items {
				d.sawStepPod(dp.Cluster, &pods.Items[i], time.Time{})
			}
		}
	}
	d.report.StepPods, d.report.StepPodsTLS = map[string]int{}, map[string]int{}
	d.seenMu.Lock()
	for _, p := range d.seen {
		d.report.StepPods[p.step]++
		if slices.Contains(p.args, "--ca") && slices.Contains(p.args, "--cert") && slices.Contains(p.args, "--key") {
			d.report.StepPodsTLS[p.step]++
		}
	}
	d.seenMu.Unlock()
	if !d.o.TLS {
		return nil
	}
	for _, step := range tlsSteps {
		if n, tls := d.report.StepPods[step], d.report.StepPodsTLS[step]; n == 0 || tls != n {
			return fmt.Errorf("TLS: %d of %d %s pods carried --ca, --cert and --key, want all of at least one", tls, n, step)
		}
	}
	d.Say("TLS: every pause, snapshot, restore-volumes and restore-data pod dialed with --ca, --cert and --key (%v)", d.report.StepPodsTLS)
	return nil
}
