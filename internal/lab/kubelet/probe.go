package kubelet

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
)

// readinessProbe is the httpGet readiness probe of the regular container name, nil when it has
// none. Other probe kinds (exec, tcpSocket, grpc) are not run in the lab: such a container is
// Ready once started, as one without a probe is.
func (r *podRun) readinessProbe(name string) *corev1.Probe {
	for _, c := range r.spec.Spec.Containers {
		if c.Name == name && c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil {
			return c.ReadinessProbe
		}
	}
	return nil
}

// probeReadiness runs the container's readiness probe for as long as this run of it lasts
// (until exited is closed), as the kubelet's prober does: the first probe after
// initialDelaySeconds, then one every periodSeconds (default 10); Ready after successThreshold
// successes in a row, not Ready after failureThreshold failures (default 3). An HTTP status in
// [200, 400) is a success. Every pod shares the node's network, so the probe dials the pod IP
// (the node's address) unless the probe names a host.
func (r *podRun) probeReadiness(log klog.Logger, name string, p *corev1.Probe, exited <-chan struct{}) {
	url, err := r.probeURL(name, p.HTTPGet)
	if err != nil {
		log.Info("Readiness probe cannot run: the container stays not ready", "container", name, "err", err)
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
	ready := false
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
		case !ready && ok >= successes:
			ready = true
		case ready && bad >= failures:
			ready = false
		default:
			continue
		}
		log.V(1).Info("Readiness probe", "container", name, "ready", ready, "url", url)
		r.set(func(st *corev1.PodStatus) {
			select {
			case <-exited:
				return // the run is over: its status is the termination's
			default:
			}
			r.container(st, name, regular).Ready = ready
		})
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
