package operator

import (
	"errors"
	"fmt"
	"net"
	"path"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	pcv1alpha1 "github.com/fedbr/fedbr/api/pingcap/v1alpha1"
)

// Labels and annotations the operator puts on what it creates. The app.kubernetes.io labels are
// tidb-operator's, so selectors written for it work in the lab.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// LabelStoreID carries a TiKV pod's store id, as tidb-operator labels it.
	LabelStoreID = "tidb.pingcap.com/store-id"
	// AnnotationRecoveryMode records whether a TiKV pod was created in recovery mode, so a test
	// or an SRE can tell a pod recreated after restore-finish from one started in recovery.
	AnnotationRecoveryMode = "lab.fedbr.io/recovery-mode"
	// AnnotationDownTiKV on a TidbCluster lists TiKV ordinals ("1" or "0,2") the operator never
	// starts: their node is lost, so those stores stay down whatever else happens.
	AnnotationDownTiKV = "lab.fedbr.io/down-tikv"

	nameValue      = "tidb-cluster"
	managedByValue = "tidb-operator"

	ComponentPD   = "pd"
	ComponentTiKV = "tikv"
)

// defaultStorage is the data volume size when a component requests none.
var defaultStorage = resource.MustParse("1Gi")

// Observed is what one reconcile saw. Pods and PVCs are keyed by name and hold only objects
// that carry this TidbCluster's instance label.
type Observed struct {
	Cluster *pcv1alpha1.TidbCluster
	Pods    map[string]PodState
	PVCs    map[string]bool
	Service bool
	PD      PDState
}

// PodState is what the planner needs to know about one member pod.
type PodState struct {
	UID          types.UID
	Deleting     bool
	RecoveryMode bool
}

// PDState is PD as its HTTP API reports it. Healthy is false when PD could not be reached.
type PDState struct {
	Healthy bool
	Members []PDMemberState
	Stores  []StoreState
}

// PDMemberState is one entry of PD's health list.
type PDMemberState struct {
	Name      string
	ID        uint64
	ClientURL string
	Healthy   bool
}

// StoreState is one store of PD's store list.
type StoreState struct {
	ID      uint64
	Address string
	State   string
}

// Config is the operator's fixed configuration.
type Config struct {
	Addressing Addressing
	// Image runs `fedbr-lab lab pd|tikv`; the lab kubelet maps it to the fedbr-lab binary.
	Image string
}

// ActionKind is what an Action does.
type ActionKind string

// Action kinds, applied in this order.
const (
	CreateService ActionKind = "CreateService"
	CreatePVC     ActionKind = "CreatePVC"
	CreatePod     ActionKind = "CreatePod"
	DeletePod     ActionKind = "DeletePod"
)

// Action is one idempotent change. Exactly one object is set, matching Kind; DeletePod carries
// the observed pod's name, namespace and UID.
type Action struct {
	Kind    ActionKind
	Pod     *corev1.Pod
	PVC     *corev1.PersistentVolumeClaim
	Service *corev1.Service
}

func (a Action) String() string {
	switch {
	case a.Pod != nil:
		return string(a.Kind) + " " + a.Pod.Name
	case a.PVC != nil:
		return string(a.Kind) + " " + a.PVC.Name
	case a.Service != nil:
		return string(a.Kind) + " " + a.Service.Name
	}
	return string(a.Kind)
}

// Wait says what the plan is waiting for, if anything.
type Wait string

// Things a plan waits for.
const (
	WaitNothing Wait = ""
	// WaitPD: TiKV is not started until PD answers healthy.
	WaitPD Wait = "PDNotReady"
	// WaitVolumesReady: recovery mode without the tikv-volumes-ready annotation.
	WaitVolumesReady Wait = "TiKVVolumesNotReady"
	// WaitPodsGone: pods being deleted are recreated once they are gone.
	WaitPodsGone Wait = "PodsTerminating"
)

// Plan is the outcome of one planning step.
type Plan struct {
	Actions []Action
	Status  pcv1alpha1.TidbClusterStatus
	Wait    Wait
}

// ErrInvalidSpec marks a TidbCluster the operator cannot run; retrying does not help.
var ErrInvalidSpec = errors.New("invalid TidbCluster spec")

// MemberName is the deterministic pod name of a member.
func MemberName(tc, component string, ordinal int) string {
	return fmt.Sprintf("%s-%s-%d", tc, component, ordinal)
}

// PVCName is the claim name a StatefulSet would give the member's data volume.
func PVCName(tc, component string, ordinal int) string {
	return component + "-" + MemberName(tc, component, ordinal)
}

// memberVolume is one volume of a member: its pod volume, claim and mount path.
type memberVolume struct {
	name, claim, mountPath string
	// size is a storageVolumes entry's storageSize (validated by validate); nil for the data
	// volume, whose size is spec.<component>.requests.storage.
	size *resource.Quantity
}

// memberVolumes lists member i's volumes as tidb-operator lays them out: the data volume
// (pod volume <component>, claim <component>-<tc>-<component>-<i>, at /var/lib/<component>), then
// one per spec.<component>.storageVolumes entry (pod volume <component>-<name>, claim
// <component>-<name>-<tc>-<component>-<i>, at its mountPath or /var/lib/<component>-<name>).
func memberVolumes(tc *pcv1alpha1.TidbCluster, comp string, i int) []memberVolume {
	out := []memberVolume{{name: comp, claim: PVCName(tc.Name, comp, i), mountPath: dataDir(comp)}}
	cs := spec(tc, comp)
	if cs == nil {
		return out
	}
	for _, sv := range cs.StorageVolumes {
		v := memberVolume{name: comp + "-" + sv.Name, mountPath: sv.MountPath}
		if q, err := resource.ParseQuantity(sv.StorageSize); err == nil {
			v.size = &q
		}
		v.claim = v.name + "-" + MemberName(tc.Name, comp, i)
		if v.mountPath == "" {
			v.mountPath = dataDir(v.name)
		}
		out = append(out, v)
	}
	return out
}

// ServiceName is PD's Service, named as tidb-operator names it.
func ServiceName(tc string) string { return tc + "-pd" }

// ComputePlan decides what to change. It is pure: same input, same output.
func ComputePlan(cfg Config, o Observed) (Plan, error) {
	tc := o.Cluster
	var p Plan
	a, err := cfg.Addressing.For(tc.Annotations)
	if err != nil {
		p.Status = tc.Status
		return p, fmt.Errorf("%w: %w", ErrInvalidSpec, err)
	}
	cfg.Addressing = a
	p.Status = status(cfg, o)
	if tc.DeletionTimestamp != nil {
		// Owner references let the garbage collector remove pods and the Service.
		return p, nil
	}
	if err := validate(tc); err != nil {
		return p, err
	}
	lay, err := layoutFor(cfg.Addressing, tc)
	if err != nil {
		return p, err
	}
	pdReplicas := 0
	if hasLocalPD(tc) {
		pdReplicas = int(tc.Spec.PD.Replicas)
		if !o.Service {
			p.add(CreateService, nil, nil, service(cfg, tc))
		}
	}
	p.members(cfg, lay, o, ComponentPD, pdReplicas, func(i int) bool { return true })

	// tidb-operator runs one TiKV pod more for each store it failed over
	// (status.tikv.failureStores), and keeps it until the failover is recovered.
	tikvReplicas := tikvPodCount(tc)
	_, volumesReady := tc.Annotations[pcv1alpha1.TiKVVolumesReadyAnnotation]
	down, err := downOrdinals(tc)
	if err != nil {
		return p, err
	}
	// Restore-finish restarts nothing here: like tidb-operator's, the restore's own controller
	// (fedbr's agent) deletes the TiKV pods and clears recoveryMode; the pods come back below.
	canStart := func(i int) bool {
		switch {
		case down[i]:
			return false
		case tc.Spec.RecoveryMode && !volumesReady:
			p.wait(WaitVolumesReady)
			return false
		case !o.PD.Healthy:
			p.wait(WaitPD)
			return false
		}
		return true
	}
	p.members(cfg, lay, o, ComponentTiKV, tikvReplicas, canStart)
	return p, nil
}

// tikvPodCount is how many TiKV pods tidb-operator runs for tc: spec.tikv.replicas plus one per
// failed-over store in status.tikv.failureStores (its StatefulSet's replicas). The lab operator
// never fails a store over itself; a test sets failureStores as tidb-operator does once a store
// was Down for its tikvFailoverPeriod.
func tikvPodCount(tc *pcv1alpha1.TidbCluster) int {
	if tc.Spec.TiKV == nil || tc.Spec.TiKV.Replicas == 0 {
		return 0
	}
	return int(tc.Spec.TiKV.Replicas) + len(tc.Status.TiKV.FailureStores)
}

// downOrdinals reads AnnotationDownTiKV.
func downOrdinals(tc *pcv1alpha1.TidbCluster) (map[int]bool, error) {
	v := tc.Annotations[AnnotationDownTiKV]
	if v == "" {
		return nil, nil
	}
	down := map[int]bool{}
	for _, f := range strings.Split(v, ",") {
		i, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || i < 0 {
			return nil, fmt.Errorf("%w: annotation %s=%q: want TiKV ordinals, comma-separated", ErrInvalidSpec, AnnotationDownTiKV, v)
		}
		down[i] = true
	}
	return down, nil
}

func validate(tc *pcv1alpha1.TidbCluster) error {
	if err := validatePD(tc); err != nil {
		return err
	}
	if tc.Spec.TiKV != nil && tc.Spec.TiKV.Replicas > tikvPortOffset {
		return fmt.Errorf("%w: spec.tikv.replicas %d: at most %d", ErrInvalidSpec, tc.Spec.TiKV.Replicas, tikvPortOffset)
	}
	for _, c := range []*pcv1alpha1.ComponentSpec{tc.Spec.PD, tc.Spec.TiKV} {
		if c == nil {
			continue
		}
		if q, ok := c.Requests[corev1.ResourceStorage]; ok && q.Sign() <= 0 {
			return fmt.Errorf("%w: storage request %s must be positive", ErrInvalidSpec, q.String())
		}
		// tidb-operator parses each storageVolumes entry's storageSize into its claim's request.
		for i, sv := range c.StorageVolumes {
			if q, err := resource.ParseQuantity(sv.StorageSize); err != nil || q.Sign() <= 0 {
				return fmt.Errorf("%w: storageVolumes[%d] (%q): storageSize %q must be a positive quantity", ErrInvalidSpec, i, sv.Name, sv.StorageSize)
			}
		}
	}
	return nil
}

// members plans one component: claims and pods for ordinals below replicas (only where start
// allows), deletion of pods at or above it (scale-in; claims are kept).
func (p *Plan) members(cfg Config, lay layout, o Observed, comp string, replicas int, start func(int) bool) {
	tc := o.Cluster
	for i := 0; i < replicas; i++ {
		st, exists := o.Pods[MemberName(tc.Name, comp, i)]
		switch {
		case exists && st.Deleting:
			p.wait(WaitPodsGone)
		case exists:
		case start(i):
			// The claim is gated with the pod: in recovery mode the restore creates the TiKV
			// claims itself, bound to the restored volumes, and a claim made here first would
			// provision an empty volume and conflict with them.
			for _, v := range memberVolumes(tc, comp, i) {
				if !o.PVCs[v.claim] {
					p.add(CreatePVC, nil, pvc(tc, comp, i, v), nil)
				}
			}
			p.add(CreatePod, pod(cfg, lay, tc, comp, i), nil, nil)
		}
	}
	for _, name := range sortedNames(o.Pods) {
		st := o.Pods[name]
		if component(tc.Name, name) == comp && ordinal(tc.Name, comp, name) >= replicas && !st.Deleting {
			p.add(DeletePod, podRef(tc, name, st), nil, nil)
		}
	}
}

func (p *Plan) add(k ActionKind, pod *corev1.Pod, claim *corev1.PersistentVolumeClaim, svc *corev1.Service) {
	for _, a := range p.Actions {
		if a.Kind == k && a.Pod != nil && pod != nil && a.Pod.Name == pod.Name {
			return
		}
	}
	p.Actions = append(p.Actions, Action{Kind: k, Pod: pod, PVC: claim, Service: svc})
}

func (p *Plan) wait(w Wait) {
	if p.Wait == WaitNothing {
		p.Wait = w
	}
}

func sortedNames(m map[string]PodState) []string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// component is the component of a member pod name, "" for a foreign name.
func component(tc, name string) string {
	for _, c := range []string{ComponentPD, ComponentTiKV} {
		if ordinal(tc, c, name) >= 0 {
			return c
		}
	}
	return ""
}

// ordinal is the ordinal of a member pod name of comp, -1 for any other name.
func ordinal(tc, comp, name string) int {
	rest, ok := strings.CutPrefix(name, tc+"-"+comp+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1
	}
	return n
}

func labels(tc *pcv1alpha1.TidbCluster, comp string) map[string]string {
	l := map[string]string{LabelName: nameValue, LabelInstance: tc.Name, LabelManagedBy: managedByValue}
	if comp != "" {
		l[LabelComponent] = comp
	}
	return l
}

func ownerRef(tc *pcv1alpha1.TidbCluster) []metav1.OwnerReference {
	return []metav1.OwnerReference{{
		APIVersion: pcv1alpha1.GroupVersion.String(), Kind: "TidbCluster", Name: tc.Name, UID: tc.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
}

func podRef(tc *pcv1alpha1.TidbCluster, name string, st PodState) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tc.Namespace, UID: st.UID}}
}

func service(cfg Config, tc *pcv1alpha1.TidbCluster) *corev1.Service {
	_, port, _ := net.SplitHostPort(cfg.Addressing.PD(0))
	n, _ := strconv.Atoi(port)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: ServiceName(tc.Name), Namespace: tc.Namespace,
			Labels: labels(tc, ComponentPD), OwnerReferences: ownerRef(tc)},
		Spec: corev1.ServiceSpec{
			ClusterIP: corev1.ClusterIPNone,
			Selector:  labels(tc, ComponentPD),
			Ports:     []corev1.ServicePort{{Name: "client", Port: int32(n)}},
		},
	}
}

func spec(tc *pcv1alpha1.TidbCluster, comp string) *pcv1alpha1.ComponentSpec {
	if comp == ComponentPD {
		return tc.Spec.PD
	}
	return tc.Spec.TiKV
}

func pvc(tc *pcv1alpha1.TidbCluster, comp string, i int, v memberVolume) *corev1.PersistentVolumeClaim {
	cs := spec(tc, comp)
	size := defaultStorage
	if q, ok := cs.Requests[corev1.ResourceStorage]; ok {
		size = q
	}
	if v.size != nil {
		size = *v.size
	}
	claim := v.claim
	l := labels(tc, comp)
	l["tidb.pingcap.com/pod-name"] = MemberName(tc.Name, comp, i)
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: tc.Namespace, Labels: l},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: cs.StorageClassName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}
}

// TLSEnabled says tc's components serve and dial over mutual TLS (spec.tlsCluster.enabled).
func TLSEnabled(tc *pcv1alpha1.TidbCluster) bool {
	return tc.Spec.TLSCluster != nil && tc.Spec.TLSCluster.Enabled
}

// NodeSecret is the Secret with a component's certificate of a TidbCluster with tlsCluster, as
// tidb-operator's users create it: <tc>-<component>-cluster-secret, keys ca.crt, tls.crt and
// tls.key. The operator mounts it into the component's pods and never creates it.
func NodeSecret(tc, comp string) string { return tc + "-" + comp + "-cluster-secret" }

// ClientSecret is the Secret with the client certificate of a TidbCluster with tlsCluster
// (<tc>-cluster-client-secret, same keys): the operator reads PD with it, fedbr's steps dial
// with it.
func ClientSecret(tc string) string { return tc + "-cluster-client-secret" }

// tlsDir is where a component's certificate is mounted, as tidb-operator mounts it.
func tlsDir(comp string) string { return "/var/lib/" + comp + "-tls" }

// dataDir is where a component's volume is mounted. Containers run with working directory "/",
// and the arguments use the path relative to it, so the same pod works on a real node and on a
// lab node (where "/" is the container's $FEDBR_LAB_ROOT).
func dataDir(comp string) string { return "/var/lib/" + comp }

func pod(cfg Config, lay layout, tc *pcv1alpha1.TidbCluster, comp string, i int) *corev1.Pod {
	name := MemberName(tc.Name, comp, i)
	l := labels(tc, comp)
	ann := map[string]string{}
	var args []string
	switch comp {
	case ComponentPD:
		addr := cfg.Addressing.PD(i)
		scheme := "http://"
		if TLSEnabled(tc) {
			scheme = "https://"
		}
		args = []string{"lab", "pd", "--name", name, "--data-dir", strings.TrimPrefix(dataDir(comp), "/"),
			"--listen", addr, "--advertise-url", scheme + addr}
	default:
		addr := cfg.Addressing.TiKV(i)
		id := cfg.Addressing.StoreID(i)
		l[LabelStoreID] = strconv.FormatUint(id, 10)
		ann[AnnotationRecoveryMode] = strconv.FormatBool(tc.Spec.RecoveryMode)
		args = []string{"lab", "tikv", "--store-id", strconv.FormatUint(id, 10),
			"--data-dir", strings.TrimPrefix(dataDir(comp), "/"), "--pd", pdAddress(cfg.Addressing, tc),
			"--listen", addr, "--advertise-addr", addr}
		args = append(args, lay.args()...)
		if vols := memberVolumes(tc, comp, i); len(vols) > 1 {
			// The TiKV double keeps its log on its first storage volume, as TiKV's
			// raft-engine.dir on a volume of its own.
			args = append(args, "--raft-dir", strings.TrimPrefix(vols[1].mountPath, "/"))
		}
	}
	var mounts []corev1.VolumeMount
	var volumes []corev1.Volume
	for _, v := range memberVolumes(tc, comp, i) {
		mounts = append(mounts, corev1.VolumeMount{Name: v.name, MountPath: v.mountPath})
		volumes = append(volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.claim},
		}})
	}
	if TLSEnabled(tc) {
		// As tidb-operator: the component's certificate from <tc>-<component>-cluster-secret at
		// /var/lib/<component>-tls, read-only.
		dir := tlsDir(comp)
		args = append(args, "--ca", strings.TrimPrefix(path.Join(dir, "ca.crt"), "/"),
			"--cert", strings.TrimPrefix(path.Join(dir, corev1.TLSCertKey), "/"),
			"--key", strings.TrimPrefix(path.Join(dir, corev1.TLSPrivateKeyKey), "/"))
		mounts = append(mounts, corev1.VolumeMount{Name: comp + "-tls", MountPath: dir, ReadOnly: true})
		volumes = append(volumes, corev1.Volume{Name: comp + "-tls", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: NodeSecret(tc.Name, comp)},
		}})
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tc.Namespace, Labels: l, Annotations: ann,
			OwnerReferences: ownerRef(tc)},
		Spec: corev1.PodSpec{
			Hostname:                      name,
			RestartPolicy:                 corev1.RestartPolicyAlways,
			TerminationGracePeriodSeconds: ptr.To[int64](10),
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				// One member per node where there are enough nodes, as in production.
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight: 100,
					PodAffinityTerm: corev1.PodAffinityTerm{
						TopologyKey:   corev1.LabelHostname,
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels(tc, comp)},
					},
				}},
			}},
			// The restricted Pod Security Standard: the lab's tenant namespaces enforce it. A new
			// volume's root is root's (a fresh ext4): fsGroup makes the kubelet give the member's
			// volumes to its group, so that user 65532 writes there (tidb-operator's
			// spec.podSecurityContext, as a user running TiKV as non-root sets it).
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
				FSGroup:        ptr.To[int64](65532),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name:       comp,
				Image:      cfg.Image,
				Args:       args,
				WorkingDir: "/",
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				// One Go P per double: the lab runs a score of them on two cores, where
				// more Ps only add thread wakeups (a third of an idle store's CPU).
				Env:          []corev1.EnvVar{{Name: "GOMAXPROCS", Value: "1"}},
				VolumeMounts: mounts,
			}},
			Volumes: volumes,
		},
	}
}

// status is what the TidbCluster status should say, from PD's own view: members from PD's
// health list, stores from PD's store list, each store mapped to the pod serving its address.
func status(cfg Config, o Observed) pcv1alpha1.TidbClusterStatus {
	st := *o.Cluster.Status.DeepCopy()
	if !hasLocalPD(o.Cluster) {
		// The PD belongs to another TidbCluster (another part of a federated cluster): it
		// publishes the members; this one publishes only its own stores.
		st.PD.Members = nil
	}
	if !o.PD.Healthy {
		return unhealthyStatus(cfg, o, st)
	}
	if hasLocalPD(o.Cluster) {
		st.PD.Members = map[string]pcv1alpha1.PDMember{}
	}
	for _, m := range o.PD.Members {
		if st.PD.Members == nil {
			break
		}
		st.PD.Members[m.Name] = pcv1alpha1.PDMember{Name: m.Name, ID: strconv.FormatUint(m.ID, 10),
			ClientURL: m.ClientURL, Health: m.Healthy}
	}
	byAddr := map[string]string{}
	for i := range tikvPodCount(o.Cluster) {
		byAddr[cfg.Addressing.TiKV(i)] = MemberName(o.Cluster.Name, ComponentTiKV, i)
	}
	st.TiKV.Stores = map[string]pcv1alpha1.TiKVStore{}
	for _, s := range o.PD.Stores {
		pod, ok := byAddr[s.Address]
		if !ok {
			// A store of another part of a federated cluster, or of a removed member.
			continue
		}
		host, _, _ := net.SplitHostPort(s.Address)
		id := strconv.FormatUint(s.ID, 10)
		st.TiKV.Stores[id] = pcv1alpha1.TiKVStore{ID: id, PodName: pod, IP: host, State: s.State}
	}
	st.TiKV.Phase = "Normal"
	if o.Cluster.Spec.RecoveryMode {
		st.TiKV.Phase = "Recovery"
	}
	return st
}

// unhealthyStatus is the status while PD cannot be read: the last known members are kept,
// marked unhealthy, because fedbr still needs the address.
func unhealthyStatus(cfg Config, o Observed, st pcv1alpha1.TidbClusterStatus) pcv1alpha1.TidbClusterStatus {
	if !hasLocalPD(o.Cluster) {
		return st
	}
	st.PD.Members = map[string]pcv1alpha1.PDMember{}
	for k, m := range o.Cluster.Status.PD.Members {
		m.Health = false
		st.PD.Members[k] = m
	}
	if len(st.PD.Members) == 0 {
		name := MemberName(o.Cluster.Name, ComponentPD, 0)
		scheme := "http://"
		if TLSEnabled(o.Cluster) {
			scheme = "https://"
		}
		st.PD.Members[name] = pcv1alpha1.PDMember{Name: name, ClientURL: scheme + cfg.Addressing.PD(0)}
	}
	return st
}
