// Package plane is the manager's view of the data planes: one controller-runtime Cluster (client
// and informer cache) per context of the manager's kubeconfig, where the context name is the
// data plane's k8sClusterName, plus whether each plane answers right now.
//
// A plane that is down when the manager starts must not stop the manager or the other planes:
// each plane's cache starts on its own, and only once it has synced does the plane count as
// reachable and its member watches get added (OnSynced). Reachability is then probed in the
// background; a change is reported on Changes so that every object gets reconciled again — a
// probe interval bounds how fast an outage is noticed, never how fast a member change is seen
// (that is the watch).
//
// A plane's cache keeps of each member only what the manager reads (trim.go): a member padded
// to the API server's limit costs the manager's memory no more than one of the agent's.
//
// A context's user authenticates as the kubeconfig says, but the manager runs no credential
// plugin: an exec user of Amazon EKS's two forms ("aws eks get-token", "aws-iam-authenticator
// token") gets its tokens minted in-process with the manager's own AWS identity (package
// ekstoken), and any other exec plugin or auth-provider leaves that plane unreachable with
// ErrExecPlugin or ErrAuthProvider, naming the context and the command. A context naming a
// local file (a token file, a certificate or key path) is refused with ErrFileReference: the
// kubeconfig comes from a Secret, and the file would be read where it is loaded.
package plane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/fedbr/fedbr/internal/agentlease"
	"github.com/fedbr/fedbr/internal/cloud/aws/ekstoken"
	"github.com/fedbr/fedbr/internal/metrics"
	"github.com/fedbr/fedbr/internal/restconfig"
)

// Plane is one data plane.
type Plane struct {
	// Name is the kubeconfig context name, which is the k8sClusterName of members.
	Name string
	// Cluster is nil for a plane whose context failed to load (see Set.Get).
	Cluster cluster.Cluster

	probe     discovery.DiscoveryInterface
	leases    coordinationv1client.LeasesGetter
	token     Token // of the context's static token, if any
	mu        sync.Mutex
	synced    bool
	reachable bool
	lastErr   error
	// agentErr is why no agent runs for the plane (nil: one does), from the last probe.
	agentErr     error
	agentChecked bool
}

// Agent says whether a probe has looked for the plane's agent yet (checked) and, if so, why it
// found none running (its Lease missing, released, stale or unreadable; nil when one runs).
func (p *Plane) Agent() (checked bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.agentChecked, p.agentErr
}

// Reachable says whether the plane's cache has synced and its API server answered the last probe.
func (p *Plane) Reachable() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.synced && p.reachable
}

// LastError is why the plane is unreachable (nil when reachable).
func (p *Plane) LastError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// Options configure a Set.
type Options struct {
	// Kubeconfig is the file with one context per data plane.
	Kubeconfig string
	// Scheme knows the member kinds.
	Scheme *runtime.Scheme
	// AgentNamespace is where each plane's agent holds its Lease (default
	// agentlease.DefaultNamespace); each probe reads it (Plane.Agent).
	AgentNamespace string
	// ProbeInterval is how often each API server is probed (default 5s); ProbeTimeout bounds a
	// probe (default 3s).
	ProbeInterval, ProbeTimeout time.Duration
	// OnSynced is called once per plane when its cache has synced (add watches here).
	OnSynced func(*Plane) error
	// Namespaces restrict each plane's cache to these namespaces, where the manager's identity
	// is bound per namespace (the agent chart's watchNamespaces); empty: every namespace.
	Namespaces []string
	// Log is the logger.
	Log logr.Logger
}

// Set is every data plane of one kubeconfig.
type Set struct {
	o      Options
	planes map[string]*Plane

	mu   sync.Mutex
	subs []chan event.GenericEvent
}

// Load reads the kubeconfig and builds (without starting) one Cluster per context.
func Load(o Options) (*Set, error) {
	if o.AgentNamespace == "" {
		o.AgentNamespace = agentlease.DefaultNamespace
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = 5 * time.Second
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 3 * time.Second
	}
	raw, err := clientcmd.LoadFromFile(o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("reading the data planes' kubeconfig %s: %w", o.Kubeconfig, err)
	}
	if len(raw.Contexts) == 0 {
		return nil, fmt.Errorf("kubeconfig %s has no context: want one per data plane, named as its k8sClusterName", o.Kubeconfig)
	}
	s := &Set{o: o, planes: map[string]*Plane{}}
	for name := range raw.Contexts {
		p, err := loadPlane(raw, name, o)
		if err != nil {
			// One bad context (certificate data, an unknown auth provider, a missing
			// cluster) is that plane's problem only: it stays known and unreachable with
			// the load error, and the other planes go on.
			o.Log.Error(err, "Loading a data plane's context; it stays unreachable", "plane", name)
			p = &Plane{Name: name, lastErr: err}
		}
		s.planes[name] = p
	}
	return s, nil
}

// loadPlane builds the plane of one context.
func loadPlane(raw *clientcmdapi.Config, name string, o Options) (*Plane, error) {
	cfg, err := Config(raw, name, "manager")
	if err != nil {
		return nil, fmt.Errorf("context %q of %s: %w", name, o.Kubeconfig, err)
	}
	p, err := newPlane(name, cfg, o)
	if err != nil {
		return nil, err
	}
	p.token, _ = ContextToken(raw, name)
	return p, nil
}

// TokenExpiry is when the plane's kubeconfig token expires (zero: not known to).
func (p *Plane) TokenExpiry() time.Time {
	return p.token.Expiry
}

// Config is the client configuration of context name of raw, built as the manager builds its
// planes' (component names the user agent, fedbr-<component>/<version>): an exec user of
// the two EKS forms gets its tokens minted in-process, any other exec plugin or auth-provider
// is refused (ErrExecPlugin, ErrAuthProvider) before anything could run it. `fedbr describe`
// and `fedbr logs` build the data planes' clients with it, so that a kubeconfig read from a
// Secret never runs a command on the machine that reads it.
func Config(raw *clientcmdapi.Config, name, component string) (*rest.Config, error) {
	if err := fileReferences(raw, name); err != nil {
		return nil, err
	}
	eks, err := credentialPlugin(raw, name)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, name, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, err
	}
	// Like clientcmd, which reads a user's credentials only for a TLS server, never send a
	// token in the clear.
	if eks != nil && rest.IsConfigTransportTLS(*cfg) {
		cfg.ExecProvider = nil // served in-process: nothing is run
		cfg.Wrap(eks.Wrap)
	}
	if cfg.ExecProvider != nil || cfg.AuthProvider != nil {
		// credentialPlugin refused or served every plugin; this is the net under it.
		return nil, fmt.Errorf("context %q still names a credential plugin: %w", name, ErrExecPlugin)
	}
	return restconfig.Finish(cfg, component), nil
}

// ErrExecPlugin is the load error of a context whose user runs an exec credential plugin
// other than the two EKS token commands, which fedbr serves in-process.
var ErrExecPlugin = errors.New("fedbr runs no credential plugin: it mints EKS tokens itself for \"aws eks get-token\" and \"aws-iam-authenticator token\" users; give this plane a token or a client certificate")

// ErrFileReference is the load error of a context that names a local file (a token file, a
// client certificate or key, a CA file): the planes' kubeconfig comes from a Secret, and a file
// it names would be read on the machine that loads it and sent to the server it names.
var ErrFileReference = errors.New("the data planes' kubeconfig must carry its credentials inline (token, client-certificate-data, client-key-data, certificate-authority-data), not name local files: flatten it with kubectl config view --flatten --minify")

// ErrAuthProvider is the load error of a context whose user names an auth-provider.
var ErrAuthProvider = errors.New("fedbr runs no auth-provider; give this plane a token or a client certificate")

// fileReferences refuses a context whose cluster or user names a local file (ErrFileReference),
// before clientcmd could read it.
func fileReferences(raw *clientcmdapi.Config, name string) error {
	c := raw.Contexts[name]
	if c == nil {
		return nil // clientcmd reports the missing context
	}
	var named []string
	add := func(field, path string) {
		if path != "" {
			named = append(named, fmt.Sprintf("%s %s", field, path))
		}
	}
	if cl := raw.Clusters[c.Cluster]; cl != nil {
		add("cluster "+strconv.Quote(c.Cluster)+" certificate-authority", cl.CertificateAuthority)
	}
	if u := raw.AuthInfos[c.AuthInfo]; u != nil {
		add("user "+strconv.Quote(c.AuthInfo)+" tokenFile", u.TokenFile)
		add("user "+strconv.Quote(c.AuthInfo)+" client-certificate", u.ClientCertificate)
		add("user "+strconv.Quote(c.AuthInfo)+" client-key", u.ClientKey)
	}
	if len(named) == 0 {
		return nil
	}
	return fmt.Errorf("context %q names %s: %w", name, strings.Join(named, ", "), ErrFileReference)
}

// credentialPlugin looks at the user of context name: an exec plugin of one of the two EKS
// forms (ekstoken.Parse) gets a token Source that the plane's transport takes its bearer
// tokens from, so the plugin is never run; any other exec plugin or an auth-provider is
// refused (the manager's image has none, and what one would run is the kubeconfig author's
// choice). Of the exec entry only the command and its arguments count: its env entries are
// ignored, so they choose neither the credentials nor the endpoint. Other users are left to
// clientcmd (nil, nil).
func credentialPlugin(raw *clientcmdapi.Config, name string) (*ekstoken.Source, error) {
	c := raw.Contexts[name]
	if c == nil {
		return nil, nil // clientcmd reports the missing context
	}
	user := raw.AuthInfos[c.AuthInfo]
	switch {
	case user == nil:
		return nil, nil
	case user.AuthProvider != nil:
		return nil, fmt.Errorf("user %q names auth-provider %q: %w", c.AuthInfo, user.AuthProvider.Name, ErrAuthProvider)
	case user.Exec == nil:
		return nil, nil
	}
	req, err := ekstoken.Parse(user.Exec.Command, user.Exec.Args)
	if errors.Is(err, ekstoken.ErrNotEKS) {
		return nil, fmt.Errorf("user %q runs exec plugin %q: %w", c.AuthInfo, user.Exec.Command, ErrExecPlugin)
	}
	if err != nil {
		return nil, fmt.Errorf("user %q, exec plugin %q: %w", c.AuthInfo, user.Exec.Command, err)
	}
	// New only reads the environment; the first request mints the token.
	src, err := ekstoken.New(context.Background(), req, ekstoken.Options{})
	if err != nil {
		return nil, fmt.Errorf("user %q, exec plugin %q: %w", c.AuthInfo, user.Exec.Command, err)
	}
	return src, nil
}

func newPlane(name string, cfg *rest.Config, o Options) (*Plane, error) {
	c, err := cluster.New(cfg, func(co *cluster.Options) {
		co.Scheme, co.Cache = o.Scheme, CacheOptions(o.Scheme)
		if len(o.Namespaces) > 0 {
			co.Cache.DefaultNamespaces = map[string]cache.Config{}
			for _, ns := range o.Namespaces {
				co.Cache.DefaultNamespaces[ns] = cache.Config{}
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("data plane %q: %w", name, err)
	}
	pc := rest.CopyConfig(cfg)
	pc.Timeout = o.ProbeTimeout
	d, err := discovery.NewDiscoveryClientForConfig(pc)
	if err != nil {
		return nil, fmt.Errorf("data plane %q: %w", name, err)
	}
	l, err := coordinationv1client.NewForConfig(pc)
	if err != nil {
		return nil, fmt.Errorf("data plane %q: %w", name, err)
	}
	return &Plane{Name: name, Cluster: c, probe: d, leases: l}, nil
}

// Names lists the planes, sorted.
func (s *Set) Names() []string {
	names := make([]string, 0, len(s.planes))
	for n := range s.planes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Get returns the named plane; a plane whose context failed to load is not returned (it has
// no client), though Known lists it and Reachable says false.
func (s *Set) Get(name string) (*Plane, bool) {
	p, ok := s.planes[name]
	if !ok || p.Cluster == nil {
		return nil, false
	}
	return p, true
}

// Namespaces are the namespaces the planes' caches hold (Options.Namespaces), for the planners;
// nil: every namespace.
func (s *Set) Namespaces() []string { return s.o.Namespaces }

// Known is the set of plane names, for the planners.
func (s *Set) Known() map[string]bool {
	m := make(map[string]bool, len(s.planes))
	for n := range s.planes {
		m[n] = true
	}
	return m
}

// Reachable is the set of planes reachable now, for the planners.
func (s *Set) Reachable() map[string]bool {
	m := make(map[string]bool, len(s.planes))
	for n, p := range s.planes {
		m[n] = p.Reachable()
	}
	return m
}

// Subscribe returns a channel that gets an event whenever a plane becomes reachable or
// unreachable (one channel per controller: a channel source consumes what it reads). Events
// carry no object; a pending undelivered event already stands for any later one.
func (s *Set) Subscribe() <-chan event.GenericEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan event.GenericEvent, 1)
	s.subs = append(s.subs, ch)
	return ch
}

func (s *Set) notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range s.subs {
		select {
		case ch <- event.GenericEvent{Object: &metav1.PartialObjectMetadata{}}:
		default:
		}
	}
}

// Start runs every plane until ctx ends: its cache, the OnSynced hook once synced, and the
// probe. It implements manager.Runnable and returns only when ctx ends.
func (s *Set) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for _, p := range s.planes {
		wg.Go(func() { s.run(ctx, p) })
	}
	wg.Wait()
	for name := range s.planes {
		metrics.PlaneReachable.DeleteLabelValues(name) // a reload may drop the plane
		metrics.PlaneTokenExpiry.DeleteLabelValues(name)
	}
	return nil
}

func (s *Set) run(ctx context.Context, p *Plane) {
	log := s.o.Log.WithValues("plane", p.Name)
	if p.Cluster == nil {
		p.set(false, p.LastError()) // reported unreachable, with its load error
		return
	}
	if exp := p.token.Expiry; !exp.IsZero() {
		metrics.PlaneTokenExpiry.WithLabelValues(p.Name).Set(float64(exp.Unix()))
	}
	if p.token.expired(time.Now()) {
		// Its cache cannot sync: say why now rather than wait for a sync that cannot come.
		p.set(false, p.tokenExpired())
	}
	go func() {
		if err := p.Cluster.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			log.Error(err, "data plane cache stopped")
		}
	}()
	// The cache retries its list/watch forever; wait for it without a deadline so that a plane
	// that comes up late joins when it does.
	for !p.Cluster.GetCache().WaitForCacheSync(ctx) {
		if ctx.Err() != nil {
			return
		}
	}
	if s.o.OnSynced != nil {
		if err := s.o.OnSynced(p); err != nil {
			log.Error(err, "adding watches for the data plane; it stays unreachable")
			p.set(false, err)
			return
		}
		// The watches just added started informers of their own: the plane counts as synced
		// once they have filled too, so that no reconcile's first read of a member waits for
		// its informer's list (issue 44: a restore's first reconcile after the start took
		// 100 ms that way).
		for !p.Cluster.GetCache().WaitForCacheSync(ctx) {
			if ctx.Err() != nil {
				return
			}
		}
	}
	p.mu.Lock()
	p.synced = true
	p.mu.Unlock()
	log.Info("data plane synced")
	s.probeLoop(ctx, p)
}

func (s *Set) probeLoop(ctx context.Context, p *Plane) {
	t := time.NewTicker(s.o.ProbeInterval)
	defer t.Stop()
	for {
		_, err := p.probe.ServerVersion()
		if err != nil && p.token.expired(time.Now()) {
			err = fmt.Errorf("%w: %w", p.tokenExpired(), err)
		}
		if changed := p.set(err == nil, err); changed {
			s.o.Log.Info("data plane reachability changed", "plane", p.Name, "reachable", err == nil, "error", err)
			s.notify()
		}
		if err == nil {
			_, aerr := agentlease.Check(ctx, p.leases, s.o.AgentNamespace, p.Name, time.Now())
			if p.setAgent(aerr) {
				s.o.Log.Info("data plane agent changed", "plane", p.Name, "running", aerr == nil, "error", aerr)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// tokenExpired is the reason of a plane whose token has expired.
func (p *Plane) tokenExpired() error {
	return fmt.Errorf("context %q: token of %s expired at %s: %w", p.Name, p.token.Subject, p.token.Expiry.Format(time.RFC3339), ErrTokenExpired)
}

// setAgent records whether an agent runs (err nil) and says whether that changed.
func (p *Plane) setAgent(err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := !p.agentChecked || (p.agentErr == nil) != (err == nil)
	p.agentErr, p.agentChecked = err, true
	v := 0.0
	if err == nil {
		v = 1
	}
	metrics.PlaneAgentUp.WithLabelValues(p.Name).Set(v)
	return changed
}

// set records a probe result and says whether reachability changed.
func (p *Plane) set(ok bool, err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	changed := p.reachable != ok
	p.reachable, p.lastErr = ok, err
	v := 0.0
	if ok {
		v = 1
	}
	metrics.PlaneReachable.WithLabelValues(p.Name).Set(v)
	return changed
}
