package kubelet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

// Node labels and annotations the lab node sets.
const (
	// InstanceIDAnnotation carries the AWS-double instance the node stands for; the same id
	// is in spec.providerID (aws:///ZONE/INSTANCE).
	InstanceIDAnnotation = "lab.fedbr.io/instance-id"
	// ZoneLabel is the well-known zone label.
	ZoneLabel = "topology.kubernetes.io/zone"
	// RegionLabel is the well-known region label.
	RegionLabel = "topology.kubernetes.io/region"
	// EBSZoneLabel is the zone label the EBS CSI driver's node plugin sets.
	EBSZoneLabel = "topology.ebs.csi.aws.com/zone"
)

// Options configure a lab node.
type Options struct {
	// Name is the Node's name.
	Name string
	// Zone is the node's availability zone (label topology.kubernetes.io/zone); optional.
	Zone string
	// InstanceID is the AWS-double instance the node stands for; optional.
	InstanceID string
	// Dir holds the node's pods (volumes, container roots) and logs.
	Dir string
	// Images maps container images to local executables.
	Images Images
	// Client talks to the node's cluster; give the node its own client with a generous
	// rate limit (client-go's default 5 QPS delays pod starts).
	Client kubernetes.Interface
	// Server is the API server URL pods get as KUBERNETES_SERVICE_HOST/PORT; optional.
	Server string
	// Volumes resolves EBS CSI volume handles; without it, pods with such PVCs wait.
	Volumes VolumeResolver
	// EBS, with InstanceID and Zone, makes the node stand in for the EBS CSI driver: it
	// provisions volumes for the claims of its pods (WaitForFirstConsumer classes of
	// provisioner ebs.csi.aws.com), attaches them to its instance before a pod mounts them
	// and detaches them once a deleted pod is gone. Optional.
	EBS EBS
	// Env is added to every container's environment before the pod's own env (which may
	// override it): what a real node gives its pods, such as the AWS credentials of its
	// instance role (the lab's credentials for the AWS double). Optional.
	Env []corev1.EnvVar
	// WebIdentity makes the node stand in for EKS's pod identity webhook (IRSA, irsa.go) and
	// route its pods with a role to STS. Optional.
	WebIdentity *WebIdentity
	// DNSDir is the lab's cluster DNS table (labdns). When set, every container runs in a mount
	// namespace of its own with a hosts file of its own at /etc/hosts (labdns.Hosts), as the
	// kubelet gives every pod its own: the pod's name, spec.hostAliases and the table. It needs
	// root and util-linux's unshare, setpriv and mount.
	DNSDir string
	// ClusterDomain is the cluster's DNS domain (the kubelet's --cluster-domain): the table's
	// names in it also resolve in their short forms. Empty: no short forms.
	ClusterDomain string
	// Address is the node's and every pod's IP; default 127.0.0.1 (pods share the host network).
	Address string
	// KubeletListen is where the kubelet API (container logs) listens; default Address:0.
	KubeletListen string
	// Capacity is the node's capacity and allocatable; default cpu 64, memory 256Gi, pods 110.
	Capacity corev1.ResourceList
	// RestartBackoff is the first restart delay of a failed container (doubling up to
	// MaxRestartBackoff); defaults 10 s and 5 min like the kubelet.
	RestartBackoff    time.Duration
	MaxRestartBackoff time.Duration
	// ShutdownGrace caps the grace period pods get when the node stops; default 10 s.
	ShutdownGrace time.Duration
	// Workers is the number of pod sync workers; default 4.
	Workers int
}

var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)

func (o Options) withDefaults() (Options, error) {
	if !nameRE.MatchString(o.Name) {
		return o, fmt.Errorf("node name %q must be a DNS subdomain", o.Name)
	}
	if o.Dir == "" {
		return o, errors.New("a node directory is required")
	}
	if o.Client == nil {
		return o, errors.New("a Kubernetes client is required")
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return o, err
	}
	o.Dir = dir
	if o.Address == "" {
		o.Address = "127.0.0.1"
	}
	if net.ParseIP(o.Address) == nil {
		return o, fmt.Errorf("node address %q is not an IP", o.Address)
	}
	if o.KubeletListen == "" {
		o.KubeletListen = net.JoinHostPort(o.Address, "0")
	}
	if o.Capacity == nil {
		o.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("64"),
			corev1.ResourceMemory:           resource.MustParse("256Gi"),
			corev1.ResourcePods:             resource.MustParse("110"),
			corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
		}
	}
	if o.RestartBackoff <= 0 {
		o.RestartBackoff = 10 * time.Second
	}
	if o.MaxRestartBackoff < o.RestartBackoff {
		o.MaxRestartBackoff = max(5*time.Minute, o.RestartBackoff)
	}
	if o.ShutdownGrace <= 0 {
		o.ShutdownGrace = 10 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.DNSDir != "" {
		if os.Geteuid() != 0 {
			return o, fmt.Errorf("a hosts file per pod (--dns-dir) needs a root node: %w", errNotRoot)
		}
		if o.DNSDir, err = filepath.Abs(o.DNSDir); err != nil {
			return o, err
		}
		if err := findOwnHostsTools(); err != nil {
			return o, err
		}
	}
	if o.EBS != nil && (o.InstanceID == "" || o.Zone == "" || o.Volumes == nil) {
		return o, errors.New("provisioning EBS volumes needs the node's instance, zone and volume resolver")
	}
	return o, nil
}

// Node is a lab node: a virtual-kubelet Node whose pods run as local processes.
type Node struct {
	o     Options
	ready chan struct{}
}

// New validates the options.
func New(o Options) (*Node, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Node{o: o, ready: make(chan struct{})}, nil
}

// Ready is closed once the Node is registered and pods are being served.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// Run registers the node and runs pods until ctx ends; then it stops every pod (SIGTERM,
// then SIGKILL after at most ShutdownGrace) and returns once no pod process is left.
func (n *Node) Run(ctx context.Context) error {
	o := n.o
	log := klog.FromContext(ctx).WithValues("node", o.Name)
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return fmt.Errorf("node directory: %w", err)
	}
	if err := makeTraversable(log, o.Dir); err != nil {
		return fmt.Errorf("node directory: %w", err)
	}
	// Pods outlive ctx for the shutdown: they still report status while they stop.
	podCtx, cancelPods := context.WithCancel(klog.NewContext(context.WithoutCancel(ctx), log))
	defer cancelPods()
	p := newProvider(podCtx, o)
	go p.deliver(podCtx)
	if o.DNSDir != "" {
		go p.followHosts(podCtx)
	}
	// Whatever way Run ends, no pod process outlives it.
	defer p.stopAll(o.ShutdownGrace)

	ln, srv, err := n.serveAPI(p)
	if err != nil {
		return err
	}
	defer func() { _ = srv.Close() }()
	port := ln.Addr().(*net.TCPAddr).Port

	vkCtx, cancelVK := context.WithCancel(podCtx)
	defer cancelVK()
	podInformers := informers.NewSharedInformerFactoryWithOptions(o.Client, time.Minute,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.Name).String()
		}))
	p.lister = podInformers.Core().V1().Pods().Lister()
	otherInformers := informers.NewSharedInformerFactory(o.Client, time.Minute)
	eb := record.NewBroadcaster(record.WithContext(vkCtx))
	eb.StartRecordingToSink(&corev1client.EventSinkImpl{Interface: o.Client.CoreV1().Events("")})
	defer eb.Shutdown()
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:                 o.Client.CoreV1(),
		PodInformer:               podInformers.Core().V1().Pods(),
		EventRecorder:             eb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "lab-kubelet", Host: o.Name}),
		Provider:                  p,
		ConfigMapInformer:         otherInformers.Core().V1().ConfigMaps(),
		SecretInformer:            otherInformers.Core().V1().Secrets(),
		ServiceInformer:           otherInformers.Core().V1().Services(),
		SkipDownwardAPIResolution: true,
	})
	if err != nil {
		return fmt.Errorf("pod controller: %w", err)
	}
	nc, err := node.NewNodeController(staticNode{}, n.nodeObject(port), o.Client.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(o.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease), 0))
	if err != nil {
		return fmt.Errorf("node controller: %w", err)
	}
	if o.EBS != nil {
		prov := newProvisioner(o, otherInformers)
		go prov.run(vkCtx)
	}
	podInformers.Start(vkCtx.Done())
	otherInformers.Start(vkCtx.Done())
	defer podInformers.Shutdown()
	defer otherInformers.Shutdown()
	go func() { _ = pc.Run(vkCtx, o.Workers) }()
	defer func() {
		cancelVK()
		<-pc.Done()
	}()
	select {
	case <-ctx.Done():
		return nil
	case <-pc.Ready():
	case <-pc.Done():
		return fmt.Errorf("pod controller: %w", pc.Err())
	}
	go func() { _ = nc.Run(vkCtx) }()
	defer func() {
		cancelVK()
		<-nc.Done()
	}()
	select {
	case <-ctx.Done():
		return nil
	case <-nc.Ready():
	case <-nc.Done():
		return fmt.Errorf("node controller: %w", nc.Err())
	}
	log.Info("Node ready", "kubeletPort", port, "instance", o.InstanceID, "zone", o.Zone)
	close(n.ready)

	var runErr error
	select {
	case <-ctx.Done():
	case <-pc.Done():
		runErr = fmt.Errorf("pod controller: %w", pc.Err())
	case <-nc.Done():
		runErr = fmt.Errorf("node controller: %w", nc.Err())
	}
	log.Info("Stopping pods", "grace", o.ShutdownGrace)
	p.stopAll(o.ShutdownGrace)
	return runErr
}

// nodeObject is the Node as registered: zone and instance labels, capacity, a Ready
// condition, the pod address and the kubelet API port.
func (n *Node) nodeObject(port int) *corev1.Node {
	o := n.o
	now := metav1.Now()
	nd := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: o.Name,
			Labels: map[string]string{
				"type":                             "virtual-kubelet",
				"kubernetes.io/role":               "agent",
				"kubernetes.io/hostname":           o.Name,
				"kubernetes.io/os":                 runtime.GOOS,
				"kubernetes.io/arch":               runtime.GOARCH,
				"node.kubernetes.io/instance-type": "lab",
			},
			Annotations: map[string]string{},
		},
		Status: corev1.NodeStatus{
			Phase:       corev1.NodeRunning,
			Capacity:    o.Capacity.DeepCopy(),
			Allocatable: o.Capacity.DeepCopy(),
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: o.Address}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{
				KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(port)},
			},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem:         runtime.GOOS,
				Architecture:            runtime.GOARCH,
				KubeletVersion:          "v1.37.2-lab",
				ContainerRuntimeVersion: "lab://local-process",
				OSImage:                 "fedbr lab",
			},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "lab kubelet is ready", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: now},
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated", LastHeartbeatTime: now, LastTransitionTime: now},
			},
		},
	}
	if o.Zone != "" {
		nd.Labels[ZoneLabel] = o.Zone
		nd.Labels[EBSZoneLabel] = o.Zone
		nd.Labels[RegionLabel] = strings.TrimRight(o.Zone, "abcdefghijklmnopqrstuvwxyz")
	}
	if o.InstanceID != "" {
		nd.Annotations[InstanceIDAnnotation] = o.InstanceID
		nd.Spec.ProviderID = "aws:///" + o.Zone + "/" + o.InstanceID
	}
	return nd
}

// staticNode is the node provider: the lab node's status does not change while it runs.
type staticNode struct{}

func (staticNode) Ping(context.Context) error                           { return nil }
func (staticNode) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}

// serveAPI serves the kubelet API the API server proxies `kubectl logs` to. It uses a
// self-signed certificate (the lab API servers do not verify kubelets) and no
// authentication: it listens on loopback only.
func (n *Node) serveAPI(p *provider) (net.Listener, *http.Server, error) {
	cert, err := selfSigned(n.o.Name, n.o.Address)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", n.o.KubeletListen)
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet API listen on %s: %w", n.o.KubeletListen, err)
	}
	h := api.PodHandler(api.PodHandlerConfig{
		GetContainerLogs:      p.GetContainerLogs,
		GetPods:               p.GetPods,
		GetPodsFromKubernetes: p.GetPods,
	}, false)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	return ln, srv, nil
}

func selfSigned(name, ip string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "system:node:" + name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP(ip)},
		DNSNames:     []string{name},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("kubelet API certificate: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
