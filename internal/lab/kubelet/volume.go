package kubelet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/fedbr/fedbr/internal/lab/awsdouble"
)

// EBSDriver is the CSI driver name whose volume handles are AWS-double volume ids.
const EBSDriver = "ebs.csi.aws.com"

// Volume is a lab EBS volume: a directory on this machine, or an image file the node attaches
// as a loop device and mounts ext4.
type Volume struct {
	ID    string `json:"id"`
	Dir   string `json:"dir,omitempty"`
	Image string `json:"image,omitempty"`
	// InstanceID is the instance the volume is attached to; empty when detached.
	InstanceID string `json:"instanceId,omitempty"`
	AZ         string `json:"az,omitempty"`
	// Device is the name the volume is attached under (/dev/xvdba); empty when detached.
	Device string `json:"device,omitempty"`
	// SizeGiB is the volume's capacity.
	SizeGiB int32 `json:"sizeGiB"`
}

// VolumeResolver finds the directory of a volume named by a CSI volume handle.
type VolumeResolver interface {
	Volume(ctx context.Context, id string) (Volume, error)
}

// AWSAdmin talks to the AWS double's admin API: it resolves volumes
// (GET {Endpoint}/_lab/volumes/{id}) and creates the instance a node stands for
// (POST {Endpoint}/_lab/instances); the lab's suites read its counters, set its faults and hold
// its calls through it too.
type AWSAdmin struct {
	// Endpoint is the double's base URL, e.g. http://127.0.0.1:4566.
	Endpoint string
	// Client defaults to a client with a 10 s timeout.
	Client *http.Client
}

// Volume implements VolumeResolver.
func (a AWSAdmin) Volume(ctx context.Context, id string) (Volume, error) {
	var v Volume
	if err := a.call(ctx, http.MethodGet, "/_lab/volumes/"+url.PathEscape(id), nil, &v); err != nil {
		return Volume{}, fmt.Errorf("look up volume %s: %w", id, err)
	}
	return v, nil
}

// CreateInstance creates a running instance (with only a root volume) in zone and returns
// its id.
func (a AWSAdmin) CreateInstance(ctx context.Context, zone string, tags map[string]string) (string, error) {
	spec, err := json.Marshal(map[string]any{"az": zone, "tags": tags})
	if err != nil {
		return "", err
	}
	var got struct {
		ID string `json:"id"`
	}
	if err := a.call(ctx, http.MethodPost, "/_lab/instances", spec, &got); err != nil {
		return "", fmt.Errorf("create instance in %s: %w", zone, err)
	}
	return got.ID, nil
}

// Stats reads the double's counters (GET /_lab/stats).
func (a AWSAdmin) Stats(ctx context.Context) (awsdouble.Stats, error) {
	var st awsdouble.Stats
	if err := a.call(ctx, http.MethodGet, "/_lab/stats", nil, &st); err != nil {
		return st, fmt.Errorf("read the AWS double's stats: %w", err)
	}
	return st, nil
}

// SetFaults replaces the double's injected faults (PUT /_lab/faults).
func (a AWSAdmin) SetFaults(ctx context.Context, f awsdouble.Faults) error {
	body, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := a.call(ctx, http.MethodPut, "/_lab/faults", body, nil); err != nil {
		return fmt.Errorf("set the AWS double's faults: %w", err)
	}
	return nil
}

// Hold holds every call of the EC2 action that reaches the double from now on, in flight, until
// Release (PUT and DELETE /_lab/holds/{action}: awsdouble.Server.Hold).
func (a AWSAdmin) Hold(ctx context.Context, action string) error {
	if err := a.call(ctx, http.MethodPut, "/_lab/holds/"+url.PathEscape(action), nil, nil); err != nil {
		return fmt.Errorf("hold the AWS double's %s: %w", action, err)
	}
	return nil
}

// Release lets the calls Hold held run.
func (a AWSAdmin) Release(ctx context.Context, action string) error {
	if err := a.call(ctx, http.MethodDelete, "/_lab/holds/"+url.PathEscape(action), nil, nil); err != nil {
		return fmt.Errorf("release the AWS double's %s: %w", action, err)
	}
	return nil
}

// call sends body (none when nil) and decodes the answer into out (discarded when nil).
func (a AWSAdmin) call(ctx context.Context, method, path string, body []byte, out any) error {
	c := a.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(a.Endpoint, "/")+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// prepareVolumes materializes the pod's volumes and records where each one lives. Volumes
// backed by the pod (emptyDir, secret, configMap, projected, downwardAPI) are folders under
// the pod directory; PVCs and hostPath point at directories outside it.
func (r *podRun) prepareVolumes(ctx context.Context) error {
	// All at once, as the kubelet's volume manager mounts them: most are an API round trip
	// (a token, a ConfigMap, a claim), and a pod start should wait for the slowest, not the sum.
	volumes := r.podVolumes()
	paths := make([]string, len(volumes))
	g, gctx := errgroup.WithContext(ctx)
	for i, v := range volumes {
		g.Go(func() error {
			p, err := r.prepareVolume(gctx, v)
			if err == nil {
				err = r.applyFSGroup(v, p)
			}
			if err != nil {
				return fmt.Errorf("volume %s: %w", v.Name, err)
			}
			paths[i] = p
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	byName := make(map[string]string, len(paths))
	for i, v := range volumes {
		byName[v.Name] = paths[i]
	}
	r.mu.Lock()
	r.volumes = byName
	r.mu.Unlock()
	return nil
}

// applyFSGroup gives the volume at dir to the pod's fsGroup when the kubelet would
// (ownershipApplies, setVolumeOwnership).
func (r *podRun) applyFSGroup(v corev1.Volume, dir string) error {
	psc := r.spec.Spec.SecurityContext
	if psc == nil || psc.FSGroup == nil {
		return nil
	}
	r.mu.Lock()
	_, ebs := r.devices[v.Name]
	raw := r.blockVolumes[v.Name]
	r.mu.Unlock()
	if raw {
		return nil // a raw block device: no files to own
	}
	apply, readOnly := ownershipApplies(v.VolumeSource, ebs)
	if !apply {
		return nil
	}
	return setVolumeOwnership(dir, psc.FSGroup, psc.FSGroupChangePolicy, readOnly)
}

func (r *podRun) prepareVolume(ctx context.Context, v corev1.Volume) (string, error) {
	local := filepath.Join(r.dir, "volumes", v.Name)
	src := v.VolumeSource
	switch {
	case src.EmptyDir != nil:
		// World-writable whatever the umask, as the kubelet's emptyDir (pkg/volume/emptydir).
		if err := os.MkdirAll(local, 0o777); err != nil {
			return "", err
		}
		return local, os.Chmod(local, 0o777)
	case src.HostPath != nil:
		if t := src.HostPath.Type; t != nil && (*t == corev1.HostPathDirectoryOrCreate) {
			if err := os.MkdirAll(src.HostPath.Path, 0o755); err != nil {
				return "", err
			}
		}
		return src.HostPath.Path, nil
	case src.Secret != nil:
		files, err := r.secretFiles(ctx, src.Secret.SecretName, src.Secret.Items, src.Secret.Optional)
		if err != nil {
			return "", err
		}
		return local, writeFiles(local, files, src.Secret.DefaultMode)
	case src.ConfigMap != nil:
		files, err := r.configMapFiles(ctx, src.ConfigMap.Name, src.ConfigMap.Items, src.ConfigMap.Optional)
		if err != nil {
			return "", err
		}
		return local, writeFiles(local, files, src.ConfigMap.DefaultMode)
	case src.DownwardAPI != nil:
		files, err := r.downwardFiles(src.DownwardAPI.Items)
		if err != nil {
			return "", err
		}
		return local, writeFiles(local, files, src.DownwardAPI.DefaultMode)
	case src.Projected != nil:
		files, err := r.projectedFiles(ctx, src.Projected.Sources, src.Projected.DefaultMode)
		if err != nil {
			return "", err
		}
		return local, writeFiles(local, files, src.Projected.DefaultMode)
	case src.PersistentVolumeClaim != nil:
		return r.claimDir(ctx, v.Name, src.PersistentVolumeClaim.ClaimName)
	}
	return "", errors.New("unsupported volume type in the lab (emptyDir, hostPath, secret, configMap, downwardAPI, projected and persistentVolumeClaim are)")
}

// file is one file of a secret, configMap, downwardAPI or projected volume.
type file struct {
	path string
	data []byte
	mode *int32
	// owner is the file's user when not root: a service-account token's, as the kubelet's
	// atomic writer chowns it to the pod's FsUser.
	owner *int64
}

func (r *podRun) secretFiles(ctx context.Context, name string, items []corev1.KeyToPath, optional *bool) ([]file, error) {
	sec, err := r.p.o.Client.CoreV1().Secrets(r.spec.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("secret %s: %w", name, err)
	}
	return keyFiles(sec.Data, items, "secret "+name)
}

func (r *podRun) configMapFiles(ctx context.Context, name string, items []corev1.KeyToPath, optional *bool) ([]file, error) {
	cm, err := r.p.o.Client.CoreV1().ConfigMaps(r.spec.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("configmap %s: %w", name, err)
	}
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return keyFiles(data, items, "configmap "+name)
}

func keyFiles(data map[string][]byte, items []corev1.KeyToPath, what string) ([]file, error) {
	var out []file
	if len(items) == 0 {
		for k, v := range data {
			out = append(out, file{path: k, data: v})
		}
		return out, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("%s has no key %q", what, it.Key)
		}
		out = append(out, file{path: it.Path, data: v, mode: it.Mode})
	}
	return out, nil
}

func (r *podRun) downwardFiles(items []corev1.DownwardAPIVolumeFile) ([]file, error) {
	var out []file
	src := r.envSource()
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = src.field(it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			v, err = src.resource(&r.spec.Spec.Containers[0], it.ResourceFieldRef)
		}
		if err != nil {
			return nil, fmt.Errorf("downwardAPI %s: %w", it.Path, err)
		}
		out = append(out, file{path: it.Path, data: []byte(v), mode: it.Mode})
	}
	return out, nil
}

// projectedFiles reads a projected volume's sources at once (a token request and a ConfigMap
// read, for the service-account volume every pod has), keeping their order.
func (r *podRun) projectedFiles(ctx context.Context, sources []corev1.VolumeProjection, defaultMode *int32) ([]file, error) {
	parts := make([][]file, len(sources))
	g, gctx := errgroup.WithContext(ctx)
	for i, s := range sources {
		g.Go(func() error {
			var err error
			switch {
			case s.ServiceAccountToken != nil:
				parts[i], err = r.tokenFiles(gctx, s.ServiceAccountToken, defaultMode)
			case s.Secret != nil:
				parts[i], err = r.secretFiles(gctx, s.Secret.Name, s.Secret.Items, s.Secret.Optional)
			case s.ConfigMap != nil:
				parts[i], err = r.configMapFiles(gctx, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional)
			case s.DownwardAPI != nil:
				parts[i], err = r.downwardFiles(s.DownwardAPI.Items)
			default:
				err = errors.New("unsupported projected source in the lab (serviceAccountToken, secret, configMap and downwardAPI are)")
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.Concat(parts...), nil
}

// tokenFiles requests a bound service-account token through the TokenRequest API, as the
// kubelet does. The lab does not refresh it. Its file has the kubelet's mode and owner
// (pkg/volume/projected collectData): the volume's defaultMode, or 0600 when the pod has an
// fsGroup or an FsUser (every container runs as the same runAsUser, util.FsUserFrom), owned by
// that FsUser; an fsGroup's ownership change then makes it 0640.
func (r *podRun) tokenFiles(ctx context.Context, p *corev1.ServiceAccountTokenProjection, defaultMode *int32) ([]file, error) {
	sa := r.spec.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: r.spec.Name, UID: r.spec.UID},
	}}
	if p.Audience != "" {
		tr.Spec.Audiences = []string{p.Audience}
	}
	got, err := r.p.o.Client.CoreV1().ServiceAccounts(r.spec.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("request token of service account %s: %w", sa, err)
	}
	f := file{path: p.Path, data: []byte(got.Status.Token), mode: defaultMode}
	fsUser := fsUserOf(r.spec)
	if fsUser != nil || (r.spec.Spec.SecurityContext != nil && r.spec.Spec.SecurityContext.FSGroup != nil) {
		f.mode = new(int32(0o600))
	}
	f.owner = fsUser
	return []file{f}, nil
}

// claimDir resolves a PVC, the pod's volume name, to its PV's directory (and records an EBS
// volume's device under name).
func (r *podRun) claimDir(ctx context.Context, name, claim string) (string, error) {
	core := r.p.o.Client.CoreV1()
	pvc, err := core.PersistentVolumeClaims(r.spec.Namespace).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("claim %s: %w", claim, err)
	}
	if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
		return "", fmt.Errorf("claim %s is not bound yet", claim)
	}
	pv, err := core.PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("volume %s of claim %s: %w", pvc.Spec.VolumeName, claim, err)
	}
	switch {
	case pv.Spec.CSI != nil && pv.Spec.CSI.Driver == EBSDriver:
		if r.p.o.Volumes == nil {
			return "", fmt.Errorf("volume %s is an EBS volume but the node has no volume resolver (--aws-endpoint)", pv.Name)
		}
		v, err := r.p.o.Volumes.Volume(ctx, pv.Spec.CSI.VolumeHandle)
		if err != nil {
			return "", err
		}
		if v.InstanceID == "" && r.p.o.EBS != nil {
			// ControllerPublishVolume: the volume joins the node's instance, so a snapshot
			// of the instance captures it.
			if err := r.p.o.EBS.AttachVolume(ctx, v.ID, r.p.o.InstanceID); err != nil {
				return "", err
			}
			// Again, for the device name the attachment chose.
			if v, err = r.p.o.Volumes.Volume(ctx, v.ID); err != nil {
				return "", err
			}
		}
		if v.InstanceID == r.p.o.InstanceID && r.p.o.EBS != nil {
			r.mu.Lock()
			r.ebsVolumes = append(r.ebsVolumes, v.ID)
			r.mu.Unlock()
		}
		r.mu.Lock()
		if r.devices == nil {
			r.devices = map[string]Volume{}
		}
		r.devices[name] = v
		r.mu.Unlock()
		if v.InstanceID != "" && r.p.o.InstanceID != "" && v.InstanceID != r.p.o.InstanceID {
			return "", fmt.Errorf("volume %s is attached to instance %s, not to this node's %s", v.ID, v.InstanceID, r.p.o.InstanceID)
		}
		if block(pvc) {
			if v.Image == "" {
				return "", fmt.Errorf("claim %s is volumeMode Block: the lab attaches only image volumes as block devices (lab up --volumes ext4)", claim)
			}
			dev, err := r.p.stageBlock(v)
			if err != nil {
				return "", err
			}
			r.mu.Lock()
			if r.blockVolumes == nil {
				r.blockVolumes = map[string]bool{}
			}
			r.blockVolumes[name] = true
			r.mu.Unlock()
			return dev, nil
		}
		if v.Image != "" {
			return r.p.stage(ctx, v)
		}
		// NodeStageVolume formats a new volume: its root then is a fresh ext4's.
		if err := freshFilesystem(v.Dir); err != nil {
			return "", fmt.Errorf("volume %s: %w", v.ID, err)
		}
		return v.Dir, makeTraversable(klog.FromContext(ctx), filepath.Dir(v.Dir))
	case pv.Spec.HostPath != nil:
		return pv.Spec.HostPath.Path, nil
	case pv.Spec.Local != nil:
		return pv.Spec.Local.Path, nil
	}
	return "", fmt.Errorf("volume %s: only CSI %s, hostPath and local persistent volumes work in the lab", pv.Name, EBSDriver)
}

// block says whether a claim is a raw block device (volumeMode Block).
func block(pvc *corev1.PersistentVolumeClaim) bool {
	return pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock
}

// linkDevices gives a container its volumeDevices: root+devicePath a link to the claim's
// device, as the kubelet makes the block device node. A volumeDevice naming a claim that is not
// a block one, and a volumeMount naming one that is, are refused as the kubelet refuses them.
func linkDevices(root string, c corev1.Container, volumes map[string]string, blocks map[string]bool) error {
	for _, m := range c.VolumeMounts {
		if blocks[m.Name] {
			return fmt.Errorf("volume %s is a raw block claim (volumeMode Block): name it in volumeDevices, not volumeMounts", m.Name)
		}
	}
	for _, d := range c.VolumeDevices {
		dev, ok := volumes[d.Name]
		if !ok || !blocks[d.Name] {
			return fmt.Errorf("volumeDevice %s: %q is not a raw block claim of the pod", d.DevicePath, d.Name)
		}
		target := filepath.Join(root, filepath.Clean("/"+d.DevicePath))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(dev, target); err != nil {
			return fmt.Errorf("volumeDevice %s: %w", d.DevicePath, err)
		}
	}
	return nil
}

// writeFiles writes a volume's files afresh (the lab does not update them later).
func writeFiles(dir string, files []file, defaultMode *int32) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		clean := filepath.Clean("/" + f.path)
		p := filepath.Join(dir, clean)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if defaultMode != nil {
			mode = os.FileMode(*defaultMode)
		}
		if f.mode != nil {
			mode = os.FileMode(*f.mode)
		}
		if err := os.WriteFile(p, f.data, 0o600); err != nil {
			return err
		}
		// The mode as given, whatever the umask: a 0400 file is root's only, as on a node.
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
		if f.owner != nil {
			if err := os.Chown(p, int(*f.owner), -1); err != nil {
				return err
			}
		}
	}
	return nil
}

// linkMounts builds a container's root folder: every volumeMount becomes a symlink at
// root+mountPath to the volume's directory (or its subPath). Nested mount paths would put
// links inside volumes, so they are refused.
func linkMounts(root string, mounts []corev1.VolumeMount, volumes map[string]string, env []string) error {
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	sorted := slices.Clone(mounts)
	slices.SortFunc(sorted, func(a, b corev1.VolumeMount) int { return strings.Compare(a.MountPath, b.MountPath) })
	var done []string
	for _, m := range sorted {
		mp := filepath.Clean("/" + m.MountPath)
		for _, d := range done {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				return fmt.Errorf("mount %s is inside mount %s: nested mounts are not supported in the lab", mp, d)
			}
		}
		done = append(done, mp)
		src, ok := volumes[m.Name]
		if !ok {
			return fmt.Errorf("mount %s: no volume %q", mp, m.Name)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expandAll([]string{m.SubPathExpr}, env)[0]
		}
		if sub != "" {
			src = filepath.Join(src, filepath.Clean("/"+sub))
			if _, err := os.Lstat(src); errors.Is(err, os.ErrNotExist) {
				if err := os.MkdirAll(src, 0o755); err != nil {
					return err
				}
			}
		}
		target := filepath.Join(root, mp)
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		if err := os.Symlink(src, target); err != nil {
			return fmt.Errorf("mount %s: %w", mp, err)
		}
	}
	return nil
}
