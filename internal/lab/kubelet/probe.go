package kubelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
)

// httpProbes are the httpGet readiness and liveness probes of the regular container name, nil
// where it has none. Other probe kinds (exec, tcpSocket, grpc) and startup probes are not run in
// the lab: such a container is Ready once started, as one without a probe is, and never killed
// by a probe.
func (r *podRun) httpProbes(name string) (readiness, liveness *corev1.Probe) {
	for _, c := range r.spec.Spec.Containers {
		if c.Name != name {
			continue
		}
		if c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil {
			readiness = c.ReadinessProbe
		}
		if c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil {
			liveness = c.LivenessProbe
		}
	}
	return readiness, liveness
}

// probeReadiness runs the container's readiness probe for as long as this run of it lasts:
// Ready after successThreshold successes in a row, not Ready after failureThreshold failures.
func (r *podRun) probeReadiness(log klog.Logger, name string, p *corev1.Probe, exited <-chan struct{}) {
	r.probe(log, name, "Readiness", p, false, exited, func(ready bool) bool {
		r.set(func(st *corev1.PodStatus) {
			select {
			case <-exited:
				return // the run is over: its status is the termination's
			default:
			}
			r.container(st, name, regular).Ready = ready
		})
		return false
	})
}

// probeLiveness runs the container's liveness probe for as long as this run of it lasts. After
// failureThreshold failures in a row the container is killed as the kubelet kills it: SIGTERM to
// its process group, SIGKILL once the probe's terminationGracePeriodSeconds (else the pod's) is
// over; the pod's restart policy then decides, with the usual back-off.
func (r *podRun) probeLiveness(log klog.Logger, name string, p *corev1.Probe, exited <-chan struct{}, pid int) {
	r.probe(log, name, "Liveness", p, true, exited, func(alive bool) bool {
		if alive {
			return false
		}
		grace := r.gracePeriod(r.spec)
		if p.TerminationGracePeriodSeconds != nil {
			grace = time.Duration(*p.TerminationGracePeriodSeconds) * time.Second
		}
		log.Info("Container failed liveness probe, will be restarted", "container", name, "grace", grace)
		_ = syscall.Kill(-pid, syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-exited:
		case <-t.C:
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
		return true
	})
}

// probe runs an httpGet probe for as long as this run of the container lasts (until exited is
// closed), as the kubelet's prober does: the first probe after initialDelaySeconds, then one
// every periodSeconds (default 10). The result turns true after successThreshold successes in a
// row and false after failureThreshold failures in a row (default 3); changed is called with
// each new result (the first result is initial), and probing ends when it returns true. An HTTP
// status in [200, 400) is a success. Every pod shares the node's network, so the probe dials the
// pod IP (the node's address) unless the probe names a host.
func (r *podRun) probe(log klog.Logger, name, what string, p *corev1.Probe, initial bool, exited <-chan struct{}, changed func(bool) bool) {
	url, err := r.probeURL(name, p.HTTPGet)
	if err != nil {
		log.Info(what+" probe cannot run", "container", name, "err", err)
		return
	}
	period := time.Duration(max(p.PeriodSeconds, 1)) * time.Second
	if p.PeriodSeconds == 0 {
		period = 10 * time.Second
	}
	timeout := time.Duration(max(p.TimeoutSeconds, 1)) * time.Second
	successes, failures := max(p.SuccessThreshold, 1), p.FailureThreshold
	if failures <= 0 {
		failures = 3
	}
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{
		// As the kubelet: a probe does not verify the serving certificate.
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // G402: the kubelet's probes do not verify
		DisableKeepAlives: true}}
	wait := time.Duration(p.InitialDelaySeconds) * time.Second
	var ok, bad int32
	result := initial
	for {
		select {
		case <-exited:
			return
		case <-time.After(wait):
		}
		wait = period
		if probeOnce(client, url) {
			ok, bad = ok+1, 0
		} else {
			ok, bad = 0, bad+1
		}
		switch {
		case !result && ok >= successes:
			result = true
		case result && bad >= failures:
			result = false
		default:
			continue
		}
		log.V(1).Info(what+" probe", "container", name, "success", result, "url", url)
		if changed(result) {
			return
		}
	}
}

// probeURL resolves an httpGet probe's URL: a named port is looked up in the container's ports.
func (r *podRun) probeURL(name string, g *corev1.HTTPGetAction) (string, error) {
	port := 0
	if g.Port.Type == intstr.Int {
		port = g.Port.IntValue()
	} else {
		for _, c := range r.spec.Spec.Containers {
			for _, cp := range c.Ports {
				if c.Name == name && cp.Name == g.Port.StrVal {
					port = int(cp.ContainerPort)
				}
			}
		}
	}
	if port <= 0 || port > 65535 {
		return "", fmt.Errorf("port %s of the probe: not a port of container %s", g.Port.String(), name)
	}
	host := g.Host
	if host == "" {
		r.mu.Lock()
		host = r.status.PodIP
		r.mu.Unlock()
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)) + g.Path, nil
}

// probeOnce is one probe: a GET answered with a status in [200, 400).
func probeOnce(c *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 400
}
