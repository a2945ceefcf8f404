package security

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"
	fedv1alpha1 "github.com/fedbr/fedbr/api/federation/v1alpha1"
	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
	"github.com/fedbr/fedbr/internal/agent/backupmember"
	"github.com/fedbr/fedbr/internal/agent/job"
	"github.com/fedbr/fedbr/internal/agent/metrics"
	"github.com/fedbr/fedbr/internal/agent/policy"
	"github.com/fedbr/fedbr/internal/agent/restoremember"
	"github.com/fedbr/fedbr/internal/manager"
	"github.com/fedbr/fedbr/internal/metricsauth"
	"github.com/fedbr/fedbr/internal/testenv"
)

// env is the one API server: control plane and data plane dp1.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	os.Exit(testenv.RunMain(m, func(e *testenv.Env) { env = e }))
}

const (
	plane      = "dp1"
	agentImage = "fedbr:test"
)

// agentPolicy is the policy of the test's agent, as its flags would give it: the defaults, plus
// a mapping that lets the control-plane namespace ops act on the data-plane namespace team-b,
// and the images of one registry repository.
//
//	--image fedbr:test --allow-namespaces ops=team-b --allowed-images 'registry.example.com/fedbr:*'
var agentPolicy = policy.Config{AgentImage: agentImage, StepServiceAccount: job.ServiceAccountName, SameNamespace: true,
	Namespaces: []string{"ops=team-b"}, Images: []string{"registry.example.com/fedbr:*"}}

// startFederation runs the manager over dp1 and the agent's member controllers with
// agentPolicy, until the test ends; cloud describes snapshots for the agent (nil: none).
func startFederation(t *testing.T, cloud backupmember.Snapshots) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	kubeconfig := filepath.Join(t.TempDir(), "planes")
	if err := testenv.WriteKubeconfig(kubeconfig, map[string]*testenv.Env{plane: env}); err != nil {
		t.Fatal(err)
	}
	managerDone := make(chan error, 1)
	go func() {
		managerDone <- manager.Run(ctx, manager.Options{Control: env.Config, Kubeconfig: kubeconfig, Metrics: metricsauth.Flags{Addr: "0"}, HealthAddr: "0",
			ProbeInterval: 200 * time.Millisecond, ReloadCheck: time.Second, Log: logr.Discard()})
	}()
	pol, err := policy.New(agentPolicy)
	if err != nil {
		t.Fatal(err)
	}
	// Each test of the package starts the agent's controllers anew, in one process.
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	agentEnv := job.Env{Image: agentImage, Region: "us-west-2", AWSEndpoint: "http://127.0.0.1:9"}
	rec, m := mgr.GetEventRecorder("fedbr-agent"), metrics.New()
	b := &backupmember.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, Metrics: m, Env: agentEnv,
		ClusterName: plane, Policy: pol, Cloud: cloud}
	r := &restoremember.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: rec, Metrics: m, Env: agentEnv,
		ClusterName: plane, Policy: pol}
	if err := b.SetupWithManager(mgr, 4); err != nil {
		t.Fatal(err)
	}
	if err := r.SetupWithManager(mgr, 4); err != nil {
		t.Fatal(err)
	}
	agentDone := make(chan error, 1)
	go func() { agentDone <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		for what, done := range map[string]chan error{"manager": managerDone, "agent": agentDone} {
			if err := <-done; err != nil {
				t.Errorf("%s: %v", what, err)
			}
		}
	})
}

// outcome is what an input gets.
type outcome string

const (
	// admission: the API server refuses it; want is the CEL rule's message.
	admission outcome = "refused at admission"
	// refused: the agent's policy refuses its member; want is the rule, names the field and value
	// its message names. No Job is created for it.
	refused outcome = "refused by policy"
	// allowed: within policy (the operator allowed it): the agent creates the member's first
	// step's Job (a backup's pause, a restore's restore-volumes), running want (the image).
	allowed outcome = "allowed"
)

// row is one hostile or careless input and what it gets.
type row struct {
	name string
	// input is created in the control plane (VolumeBackup, VolumeRestore, schedule) or, forged,
	// in the data plane (a member).
	input   client.Object
	outcome outcome
	want    string
	names   string
	// setup creates what the input needs first (a TidbCluster).
	setup func(t *testing.T)
	// podAnnotations, when set, are exactly the annotations an allowed input's step pod carries.
	podAnnotations map[string]string
	// podLabelsAbsent, when set, are label keys an allowed input's step pod must not carry.
	podLabelsAbsent []string
	// sourceNamespaces, when set, is the --source-namespaces an allowed restore's
	// restore-volumes step is given: the only namespaces whose snapshots it may use, whatever
	// the backupmeta it reads names.
	sourceNamespaces string
}

func TestHostileInputs(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"team-a", "team-b", "ops"} {
		if err := client.IgnoreAlreadyExists(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})); err != nil {
			t.Fatal(err)
		}
	}
	startFederation(t, nil)
	rows := table()
	if len(rows) < 25 {
		t.Fatalf("%d rows; the proof wants at least 25", len(rows))
	}
	t.Run("rows", func(t *testing.T) {
		for _, r := range rows {
			t.Run(r.name, func(t *testing.T) {
				t.Parallel()
				if r.setup != nil {
					r.setup(t)
				}
				err := env.Client.Create(ctx, r.input)
				switch r.outcome {
				case admission:
					if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), r.want) {
						t.Fatalf("create: %v; want Invalid with %q", err, r.want)
					}
					return
				case refused:
					mustCreate(t, err)
					assertRefused(t, r)
				case allowed:
					mustCreate(t, err)
					assertAllowed(t, r)
				}
			})
		}
	})
	t.Logf("%d rows: %s", len(rows), summary(rows))
}

func mustCreate(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("create: %v (the input should pass admission)", err)
	}
}

// memberOf is the kind, namespace and name of the member an input is or makes.
func memberOf(o client.Object) (client.Object, string) {
	switch in := o.(type) {
	case *fedv1alpha1.VolumeBackup:
		return &dpv1alpha1.VolumeBackupMember{}, in.Spec.Clusters[0].TCNamespace + "/" + fedv1alpha1.MemberName(in.Name)
	case *fedv1alpha1.VolumeRestore:
		return &dpv1alpha1.VolumeRestoreMember{}, in.Spec.Clusters[0].TCNamespace + "/" + fedv1alpha1.MemberName(in.Name)
	}
	return o.DeepCopyObject().(client.Object), o.GetNamespace() + "/" + o.GetName()
}

// failedOf is a member's Failed condition, nil when it has none.
func failedOf(m client.Object) *metav1.Condition {
	switch m := m.(type) {
	case *dpv1alpha1.VolumeBackupMember:
		return apimeta.FindStatusCondition(m.Status.Conditions, dpv1alpha1.BackupMemberFailedCondition)
	case *dpv1alpha1.VolumeRestoreMember:
		return apimeta.FindStatusCondition(m.Status.Conditions, dpv1alpha1.RestoreMemberFailedCondition)
	}
	return nil
}

// assertRefused: the member fails with the rule, its message names the field and value, an
// Event says so, no Job exists for it, and the owner (if any) fails naming the rule too.
func assertRefused(t *testing.T, r row) {
	t.Helper()
	ctx := context.Background()
	m, key := memberOf(r.input)
	ns, name, _ := strings.Cut(key, "/")
	var failed *metav1.Condition
	testenv.Eventually(t, "the member "+key+" refused", time.Minute, func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			return false, err.Error()
		}
		failed = failedOf(m)
		return failed != nil && failed.Status == metav1.ConditionTrue, fmt.Sprintf("Failed %+v", failed)
	})
	if failed.Reason != r.want {
		t.Fatalf("Failed reason %s (%s), want %s", failed.Reason, failed.Message, r.want)
	}
	if !strings.Contains(failed.Message, r.names) {
		t.Errorf("Failed message %q does not name %q", failed.Message, r.names)
	}
	jobs := &batchv1.JobList{}
	if err := env.Client.List(ctx, jobs, client.InNamespace(ns), client.MatchingLabels(job.Selector(name))); err != nil {
		t.Fatal(err)
	}
	// A Job planted with the member's labels (the ForeignJob row) is not the member's.
	kind := "VolumeBackupMember"
	if _, ok := m.(*dpv1alpha1.VolumeRestoreMember); ok {
		kind = "VolumeRestoreMember"
	}
	if owned, _ := job.Owned(m, kind, jobs.Items); len(owned) != 0 {
		t.Errorf("%d Jobs exist for a refused member: %s", len(owned), owned[0].Name)
	}
	testenv.Eventually(t, "a Warning Event "+r.want, time.Minute, func() (bool, string) {
		evs := &eventsv1.EventList{}
		if err := env.Client.List(ctx, evs, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Regarding.Name == name && e.Reason == r.want && e.Type == corev1.EventTypeWarning {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events in %s", len(evs.Items), ns)
	})
	owner, conditions := ownerOf(r.input)
	if owner == nil {
		return
	}
	testenv.Eventually(t, "the owner failed", time.Minute, func() (bool, string) {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(owner), owner); err != nil {
			return false, err.Error()
		}
		c := apimeta.FindStatusCondition(*conditions, "Failed")
		return c != nil && c.Reason == fedv1alpha1.MemberFailedReason && strings.Contains(c.Message, r.want+": refused by the agent's policy"),
			fmt.Sprintf("Failed %+v", c)
	})
}

// ownerOf is a fresh copy of a control-plane input and where its conditions are; nil for a
// forged member.
func ownerOf(o client.Object) (client.Object, *[]metav1.Condition) {
	switch in := o.(type) {
	case *fedv1alpha1.VolumeBackup:
		b := &fedv1alpha1.VolumeBackup{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name}}
		return b, &b.Status.Conditions
	case *fedv1alpha1.VolumeRestore:
		r := &fedv1alpha1.VolumeRestore{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: in.Name}}
		return r, &r.Status.Conditions
	}
	return nil, nil
}

// assertAllowed: the agent creates the member's first step's Job (a backup's pause, a
// restore's restore-volumes) running the image, and no rule refused the member.
func assertAllowed(t *testing.T, r row) {
	t.Helper()
	ctx := context.Background()
	m, key := memberOf(r.input)
	ns, name, _ := strings.Cut(key, "/")
	step := job.StepPause
	if _, ok := m.(*dpv1alpha1.VolumeRestoreMember); ok {
		step = job.StepRestoreVolumes
	}
	testenv.Eventually(t, "the "+step+" Job of "+key, time.Minute, func() (bool, string) {
		j := &batchv1.Job{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: job.Name(name, step)}, j); err != nil {
			return false, err.Error()
		}
		if args := j.Spec.Template.Spec.Containers[0].Args; r.sourceNamespaces != "" {
			if i := slices.Index(args, "--source-namespaces"); i < 0 || i+1 >= len(args) || args[i+1] != r.sourceNamespaces {
				t.Fatalf("the %s step's args %v, want --source-namespaces %s", step, args, r.sourceNamespaces)
			}
		}
		img := j.Spec.Template.Spec.Containers[0].Image
		if r.podAnnotations != nil && !maps.Equal(j.Spec.Template.Annotations, r.podAnnotations) {
			t.Fatalf("the pause pod's annotations %v, want %v", j.Spec.Template.Annotations, r.podAnnotations)
		}
		for _, k := range r.podLabelsAbsent {
			if _, ok := j.Spec.Template.Labels[k]; ok {
				t.Fatalf("the pause pod carries the label %s: %v", k, j.Spec.Template.Labels)
			}
		}
		return img == r.want, "image " + img
	})
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	if c := failedOf(m); c != nil && strings.HasSuffix(c.Reason, "NotAllowed") {
		t.Errorf("refused: %s: %s", c.Reason, c.Message)
	}
}

func summary(rows []row) string {
	n := map[outcome]int{}
	for _, r := range rows {
		n[r.outcome]++
	}
	return fmt.Sprintf("%d %s, %d %s, %d %s", n[admission], admission, n[refused], refused, n[allowed], allowed)
}

// seedTC creates the TidbCluster name in ns with a PD address, and TiKV storage volumes.
func seedTC(ns, name string, storageVolumes ...string) func(t *testing.T) {
	return func(t *testing.T) {
		ctx := context.Background()
		tc := &pcv1alpha1.TidbCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: pcv1alpha1.TidbClusterSpec{RecoveryMode: true, PD: &pcv1alpha1.ComponentSpec{Replicas: 1}, TiKV: &pcv1alpha1.ComponentSpec{Replicas: 1}}}
		for _, v := range storageVolumes {
			tc.Spec.TiKV.StorageVolumes = append(tc.Spec.TiKV.StorageVolumes, pcv1alpha1.StorageVolume{Name: v, MountPath: "/var/lib/" + v})
		}
		if err := env.Client.Create(ctx, tc); err != nil {
			t.Fatal(err)
		}
		tc.Status.PD.Members = map[string]pcv1alpha1.PDMember{name + "-pd-0": {Name: name + "-pd-0", ClientURL: "http://127.0.0.1:2379"}}
		if err := env.Client.Update(ctx, tc); err != nil {
			t.Fatal(err)
		}
	}
}

// plantJob creates, before the member exists, a Job with the member's selector labels and its
// pause step's name, as anyone who may create Jobs in the namespace could.
func plantJob(ns, member string) func(t *testing.T) {
	return func(t *testing.T) {
		labels := job.Selector(member)
		labels[job.LabelStep] = job.StepPause
		j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: job.Name(member, job.StepPause), Labels: labels},
			Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "fake", Image: "attacker.example.com/pause"}}}}}}
		if err := env.Client.Create(context.Background(), j); err != nil {
			t.Fatal(err)
		}
	}
}

// both runs setups in order.
func both(setups ...func(t *testing.T)) func(t *testing.T) {
	return func(t *testing.T) {
		for _, s := range setups {
			s(t)
		}
	}
}

// TestDocsCountTheRows holds the counts docs/security.md and the README give of this table to
// the table itself.
func TestDocsCountTheRows(t *testing.T) {
	rows := table()
	n := map[outcome]int{}
	for _, r := range rows {
		n[r.outcome]++
	}
	read := func(file string) string {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), file))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	sec := regexp.MustCompile(`(\d+) rows: (\d+) refused at admission \([^)]*\), (\d+) refused by the policy, (\d+) allowed`).FindStringSubmatch(read("docs/security.md"))
	want := []string{strconv.Itoa(len(rows)), strconv.Itoa(n[admission]), strconv.Itoa(n[refused]), strconv.Itoa(n[allowed])}
	if sec == nil || !slices.Equal(sec[1:], want) {
		t.Errorf("docs/security.md counts %v; the table has %v (rows, admission, policy, allowed)", sec, want)
	}
	readme := read("README.md")
	for _, re := range []string{`(\d+) hostile inputs in .test/security.`, `(\d+) hostile or careless inputs`} {
		m := regexp.MustCompile(re).FindStringSubmatch(readme)
		if m == nil || m[1] != strconv.Itoa(len(rows)) {
			t.Errorf("README.md: %q finds %v; the table has %d rows", re, m, len(rows))
		}
	}
}
