package demo

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/fedbr/fedbr/internal/agent/tidbcluster"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/lab/env"
	"github.com/fedbr/fedbr/internal/tidb"
)

// TestTLSSetup: Options.TLS makes a node certificate valid for the source's and the restore's
// member addresses of every data plane, turns tlsCluster on (PD addresses https://) and creates
// the client secret and both components' secrets; a TidbCluster without Options.TLS is left as
// it is.
func TestTLSSetup(t *testing.T) {
	ctx := context.Background()
	lab := &env.Lab{Dir: t.TempDir(), StorageClass: "lab-ebs",
		DataPlanes: []env.DataPlane{{Cluster: "az1", IPPrefix: "127.0.1"}, {Cluster: "az2", IPPrefix: "127.0.2"}}}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientBuilder().WithScheme(scheme).Build()

	plain := &Harness{o: Options{TiKVPerPlane: 3}, lab: lab, kube: map[string]client.Client{"az2": kube}}
	tcs := env.FederatedTidbClusters(lab, "basic", "tidb", 3, false, nil)
	if err := plain.withTLS(ctx, "az2", tcs["az2"]); err != nil || tcs["az2"].Spec.TLSCluster != nil {
		t.Fatalf("without Options.TLS: %v, tlsCluster %+v", err, tcs["az2"].Spec.TLSCluster)
	}

	kube1 := fake.NewClientBuilder().WithScheme(scheme).Build()
	d := &Harness{o: Options{TiKVPerPlane: 3, TLS: true}, lab: lab, kube: map[string]client.Client{"az1": kube1, "az2": kube}}
	if err := d.setupTLS(); err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(d.tlsSet.NodeCert)
	node, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.1.10", "127.0.2.102", "127.0.101.10", "127.0.102.100"} {
		if err := node.VerifyHostname(host); err != nil {
			t.Errorf("node certificate for %s: %v", host, err)
		}
	}
	if err := node.VerifyHostname("127.0.3.10"); err == nil {
		t.Errorf("node certificate valid for 127.0.3.10, a plane the lab does not have")
	}

	tc := tcs["az2"]
	if err := d.withTLS(ctx, "az2", tc); err != nil {
		t.Fatal(err)
	}
	// The joining part reaches PD by its Service's name, over https with tlsCluster.
	if tc.Spec.TLSCluster == nil || !tc.Spec.TLSCluster.Enabled || tidbcluster.ClusterRefPD(tc) != "https://basic-pd-peer.tidb.svc.az1.local:2379" {
		t.Errorf("tlsCluster %+v, PD %s: want enabled and https:// by name", tc.Spec.TLSCluster, tidbcluster.ClusterRefPD(tc))
	}
	// PD's certificate covers that name.
	if err := d.withTLS(ctx, "az1", tcs["az1"]); err != nil {
		t.Fatal(err)
	}
	var pdSecret corev1.Secret
	if err := kube1.Get(ctx, client.ObjectKey{Namespace: "tidb", Name: "basic-pd-cluster-secret"}, &pdSecret); err != nil {
		t.Fatal(err)
	}
	pdBlock, _ := pem.Decode(pdSecret.Data["tls.crt"])
	pdCert, err := x509.ParseCertificate(pdBlock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"basic-pd-peer.tidb.svc.az1.local", "basic-pd.tidb.svc.az1.local", "127.0.1.10"} {
		if err := pdCert.VerifyHostname(host); err != nil {
			t.Errorf("PD's certificate for %s: %v", host, err)
		}
	}
	for _, name := range []string{"basic-cluster-client-secret", "basic-pd-cluster-secret", "basic-tikv-cluster-secret"} {
		var sec corev1.Secret
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "tidb", Name: name}, &sec); err != nil {
			t.Fatalf("secret %s: %v", name, err)
		}
		if _, err := tidb.ParseTLS(sec.Data["ca.crt"], sec.Data["tls.crt"], sec.Data["tls.key"]); err != nil {
			t.Errorf("secret %s: %v", name, err)
		}
	}
	// A second demo in the same lab replaces the secrets with its own CA.
	if err := d.withTLS(ctx, "az2", env.FederatedTidbClusters(lab, "basic", "tidb", 3, false, nil)["az2"]); err != nil {
		t.Errorf("secrets again: %v", err)
	}
}

// TestStepTLS: with Options.TLS a dialing step pod without --ca fails the demo naming its
// step; without TLS it is only counted.
func TestStepTLS(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tlsArgs := []string{"br", "x", "--ca", "c", "--cert", "c", "--key", "k"}
	pod := func(ns, name, step string, args []string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{job.LabelStep: step}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "step", Args: args}}}}
	}
	objs := []client.Object{
		pod("tidb", "p", job.StepPause, tlsArgs), pod("tidb", "s", job.StepSnapshot, tlsArgs),
		pod("tidb-restored", "rv", job.StepRestoreVolumes, tlsArgs), pod("tidb-restored", "w", job.StepWarmup, []string{"warmup"}),
	}
	lab := &env.Lab{DataPlanes: []env.DataPlane{{Cluster: "az1"}}}
	for _, tc := range []struct {
		tls     bool
		rdArgs  []string
		wantErr string
	}{
		{tls: true, rdArgs: tlsArgs},
		{tls: true, rdArgs: []string{"br", "restore-data"}, wantErr: "0 of 1 restore-data pods carried --ca"},
		{tls: false, rdArgs: []string{"br", "restore-data"}},
	} {
		kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, pod("tidb-restored", "rd", job.StepRestoreData, tc.rdArgs))...).Build()
		d := &Harness{o: Options{Namespace: "tidb", RestoreNamespace: "tidb-restored", TLS: tc.tls}, lab: lab,
			kube: map[string]client.Client{"az1": kube}, report: &Report{}}
		d.o.Out = &strings.Builder{}
		err := d.stepTLS(ctx)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("tls %v, restore-data %v: %v, want %q", tc.tls, tc.rdArgs, err, tc.wantErr)
		}
		if d.report.StepPods[job.StepPause] != 1 || d.report.StepPods[job.StepWarmup] != 0 {
			t.Errorf("step pods %v: want one pause and no warm-up", d.report.StepPods)
		}
	}
}

// TestLastStepPod: the step pods of one member are timed by the last plane's pod to be seen
// created, bound and running; a pod not yet seen running leaves that time zero, and other
// members' pods and a later listing do not count.
func TestLastStepPod(t *testing.T) {
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	pod := func(member string, node string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tidb", Name: "s-" + member,
			Labels: map[string]string{job.LabelStep: job.StepSnapshot, job.LabelMember: member}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "step"}}}, Status: corev1.PodStatus{Phase: phase}}
	}
	d := &Harness{}
	d.sawStepPod("az1", pod("m", "", corev1.PodPending), t0)
	d.sawStepPod("az2", pod("m", "", corev1.PodPending), t0.Add(time.Second))
	d.sawStepPod("az1", pod("m", "n1", corev1.PodRunning), t0.Add(2*time.Second))
	d.sawStepPod("az2", pod("m", "n2", corev1.PodPending), t0.Add(3*time.Second))
	d.sawStepPod("az1", pod("old", "n1", corev1.PodRunning), t0.Add(9*time.Second))
	created, scheduled, running := d.lastStepPod("tidb", "m", job.StepSnapshot)
	if !created.Equal(t0.Add(time.Second)) || !scheduled.Equal(t0.Add(3*time.Second)) || !running.IsZero() {
		t.Errorf("created %v, scheduled %v, running %v; want +1s, +3s and none", created, scheduled, running)
	}
	d.sawStepPod("az2", pod("m", "n2", corev1.PodRunning), time.Time{}) // listed afterwards: no time
	if _, _, running := d.lastStepPod("tidb", "m", job.StepSnapshot); !running.IsZero() {
		t.Errorf("running %v from a listing, want none", running)
	}
	d.sawStepPod("az2", pod("m", "n2", corev1.PodRunning), t0.Add(4*time.Second))
	if _, _, running := d.lastStepPod("tidb", "m", job.StepSnapshot); !running.Equal(t0.Add(4 * time.Second)) {
		t.Errorf("running %v, want +4s", running)
	}
}
