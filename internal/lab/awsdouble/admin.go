package awsdouble

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// InstanceSpec describes an instance to create in the double, with its volumes.
type InstanceSpec struct {
	// AZ defaults to the region's "a" zone.
	AZ string `json:"az,omitempty"`
	// RootSizeGiB is the root volume's size; default 8.
	RootSizeGiB int32             `json:"rootSizeGiB,omitempty"`
	Volumes     []VolumeSpec      `json:"volumes,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
}

// VolumeSpec describes a data volume attached at instance creation.
type VolumeSpec struct {
	Device    string            `json:"device"`
	SizeGiB   int32             `json:"sizeGiB"`
	Type      string            `json:"type,omitempty"`
	Encrypted bool              `json:"encrypted,omitempty"`
	Tags      map[string]string `json:"tags,omitempty"`
}

// InstanceInfo is a created instance.
type InstanceInfo struct {
	ID           string       `json:"id"`
	AZ           string       `json:"az"`
	RootVolumeID string       `json:"rootVolumeId"`
	Volumes      []VolumeInfo `json:"volumes"`
}

// VolumeInfo locates a volume's directory.
type VolumeInfo struct {
	ID         string `json:"id"`
	AZ         string `json:"az"`
	Device     string `json:"device,omitempty"`
	InstanceID string `json:"instanceId,omitempty"`
	// Dir is the volume's directory, or Image its device image (awsdouble.VolumesExt4),
	// which a lab node attaches as a loop device.
	Dir   string `json:"dir,omitempty"`
	Image string `json:"image,omitempty"`
	// SizeGiB is the volume's capacity: the length of the device a lab node shows for it.
	SizeGiB int32 `json:"sizeGiB"`
}

// CreateInstance creates a running instance with a root volume and the given data volumes
// attached; lab processes write into the returned volume directories.
func (s *Server) CreateInstance(spec InstanceSpec) (InstanceInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if spec.AZ == "" {
		spec.AZ = s.opts.Region + "a"
	}
	if !s.validAZ(spec.AZ) {
		return InstanceInfo{}, fmt.Errorf("availability zone %s is not in region %s", spec.AZ, s.opts.Region)
	}
	if spec.RootSizeGiB == 0 {
		spec.RootSizeGiB = 8
	}
	now := s.now()
	in := &Instance{ID: newID("i-"), AZ: spec.AZ, RootDevice: "/dev/xvda", Tags: spec.Tags, Created: now}
	info := InstanceInfo{ID: in.ID, AZ: in.AZ}
	vols := append([]VolumeSpec{{Device: in.RootDevice, SizeGiB: spec.RootSizeGiB, Type: "gp3"}}, spec.Volumes...)
	for i, vs := range vols {
		if vs.Type == "" {
			vs.Type = "gp3"
		}
		if vs.SizeGiB <= 0 {
			return InstanceInfo{}, fmt.Errorf("volume %s: size must be positive", vs.Device)
		}
		v := &Volume{ID: newID("vol-"), AZ: in.AZ, SizeGiB: vs.SizeGiB, Type: vs.Type, Encrypted: vs.Encrypted,
			Tags: vs.Tags, Created: now, AvailableAt: now, InstanceID: in.ID, Device: vs.Device, AttachTime: now}
		if v.Encrypted {
			v.KMSKeyID = s.defaultKMSKey()
		}
		if err := s.makeVolumeStorage(v, nil); err != nil {
			return InstanceInfo{}, fmt.Errorf("create volume %s: %w", v.ID, err)
		}
		s.st.Volumes[v.ID] = v
		if i == 0 {
			info.RootVolumeID = v.ID
			continue
		}
		info.Volumes = append(info.Volumes, VolumeInfo{ID: v.ID, AZ: v.AZ, Device: v.Device, InstanceID: in.ID, Dir: v.Dir, Image: v.Image, SizeGiB: v.SizeGiB})
	}
	s.st.Instances[in.ID] = in
	s.markDirty()
	return info, nil
}

// VolumeDir is the directory holding a volume's data.
func (s *Server) VolumeDir(id string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.st.Volumes[id]
	if !ok {
		return "", fmt.Errorf("volume %s does not exist", id)
	}
	return v.Dir, nil
}

// GiveSnapshot hands snapshot id to account ownerID, which shares it back with the double's
// account: from then on it is another account's snapshot, as one shared with (or made public
// to) this account is in AWS — visible to DescribeSnapshots unless it asks for OwnerIds=self,
// restorable, its owner's tags hidden, and DeleteSnapshot or tag changes refused with
// UnauthorizedOperation. It models a backupmeta naming a snapshot fedbr does not own.
func (s *Server) GiveSnapshot(id, ownerID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	sn, ok := s.st.Snapshots[id]
	if !ok {
		return fmt.Errorf("snapshot %s does not exist", id)
	}
	if ownerID == "" || ownerID == s.opts.AccountID {
		return fmt.Errorf("owner %q: want another account than %s", ownerID, s.opts.AccountID)
	}
	sn.OwnerID = ownerID
	s.markDirty()
	return nil
}

// Inventory lists what exists, for leak checks.
type Inventory struct {
	Snapshots []InventoryItem `json:"snapshots"`
	Volumes   []InventoryItem `json:"volumes"`
	// Pending is the number of pending snapshots.
	Pending int `json:"pending"`
}

// InventoryItem is one resource in the inventory.
type InventoryItem struct {
	ID    string            `json:"id"`
	State string            `json:"state"`
	Tags  map[string]string `json:"tags,omitempty"`
	// Volume and Started, for a snapshot: its source volume and when its CreateSnapshot(s)
	// call captured it (one instant for every snapshot of one call).
	Volume  string    `json:"volume,omitempty"`
	Started time.Time `json:"started,omitzero"`
}

// Inventory lists snapshots and volumes carrying all the given tags.
func (s *Server) Inventory(tags map[string]string) Inventory {
	s.mu.Lock()
	defer s.mu.Unlock()
	has := func(t map[string]string) bool {
		for k, v := range tags {
			if got, ok := t[k]; !ok || (v != "" && got != v) {
				return false
			}
		}
		return true
	}
	inv := Inventory{Snapshots: []InventoryItem{}, Volumes: []InventoryItem{}, Pending: s.pendingCount()}
	now := s.now()
	for _, id := range sortedKeys(s.st.Snapshots) {
		sn := s.st.Snapshots[id]
		if has(sn.Tags) {
			st, _ := s.state(sn)
			inv.Snapshots = append(inv.Snapshots, InventoryItem{ID: id, State: st, Tags: sn.Tags, Volume: sn.VolumeID, Started: sn.Started})
		}
	}
	for _, id := range sortedKeys(s.st.Volumes) {
		v := s.st.Volumes[id]
		if has(v.Tags) {
			inv.Volumes = append(inv.Volumes, InventoryItem{ID: id, State: volumeState(v, now), Tags: v.Tags})
		}
	}
	return inv
}

// serveAdmin is the lab's control API:
//
//	POST /_lab/instances        InstanceSpec → InstanceInfo
//	GET  /_lab/volumes/{id}     → VolumeInfo (the directory to write into)
//	GET  /_lab/inventory?tag=K=V&tag=K2  → Inventory (snapshots and volumes with those tags)
//	GET  /_lab/faults, PUT /_lab/faults  Faults (PUT replaces them; unknown fields are refused)
//	POST /_lab/snapshots/{id}/fail?after=1m  a pending snapshot turns error after that long
//	POST /_lab/advance?by=1h     moves the double's clock forward
//	PUT  /_lab/holds/{action}, DELETE /_lab/holds/{action}  Hold an EC2 action's calls; release them
//	GET  /_lab/stats             → Stats
//	GET  /_lab/healthz
func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/_lab/")
	switch {
	case path == "healthz":
		writeJSON(w, 200, map[string]string{"status": "ok"})
	case path == "instances" && r.Method == http.MethodPost:
		var spec InstanceSpec
		if err := json.NewDecoder(r.Body).Decode(&spec); err != nil {
			writeJSON(w, 400, map[string]string{"error": err.Error()})
			return
		}
		info, err := s.CreateInstance(spec)
		if err != nil {
			writeJSON(w, 400, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, 200, info)
	case strings.HasPrefix(path, "volumes/") && r.Method == http.MethodGet:
		id := strings.TrimPrefix(path, "volumes/")
		s.mu.Lock()
		v, ok := s.st.Volumes[id]
		var info VolumeInfo
		if ok {
			info = VolumeInfo{ID: v.ID, AZ: v.AZ, Device: v.Device, InstanceID: v.InstanceID, Dir: v.Dir, Image: v.Image, SizeGiB: v.SizeGiB}
		}
		s.mu.Unlock()
		if !ok {
			writeJSON(w, 404, map[string]string{"error": "volume " + id + " does not exist"})
			return
		}
		writeJSON(w, 200, info)
	case path == "inventory":
		tags := map[string]string{}
		for _, t := range r.URL.Query()["tag"] {
			k, v, _ := strings.Cut(t, "=")
			tags[k] = v
		}
		writeJSON(w, 200, s.Inventory(tags))
	case path == "stats":
		writeJSON(w, 200, s.Stats())
	case path == "advance" && r.Method == http.MethodPost:
		d, err := time.ParseDuration(r.URL.Query().Get("by"))
		if err != nil || d < 0 {
			writeJSON(w, 400, map[string]string{"error": "want ?by=DURATION (non-negative)"})
			return
		}
		s.Advance(d)
		writeJSON(w, 200, map[string]string{"now": s.Now().UTC().Format(time.RFC3339)})
	case strings.HasPrefix(path, "snapshots/") && strings.HasSuffix(path, "/fail") && r.Method == http.MethodPost:
		s.adminFailSnapshot(w, r, strings.TrimSuffix(strings.TrimPrefix(path, "snapshots/"), "/fail"))
	case strings.HasPrefix(path, "holds/") && (r.Method == http.MethodPut || r.Method == http.MethodDelete):
		s.adminHold(w, r, strings.TrimPrefix(path, "holds/"))
	case path == "faults" && r.Method == http.MethodGet:
		writeJSON(w, 200, s.Faults())
	case path == "faults" && (r.Method == http.MethodPut || r.Method == http.MethodPost):
		s.adminSetFaults(w, r)
	default:
		writeJSON(w, 404, map[string]string{"error": "unknown admin path " + r.URL.Path})
	}
}

// adminHold is PUT /_lab/holds/{action} (Hold the action's calls from now on) and DELETE (release
// them): a lab process outside this one holds calls as an in-process test does with Hold. Only
// the EC2 actions the double serves may be held.
func (s *Server) adminHold(w http.ResponseWriter, r *http.Request, action string) {
	if _, ok := ec2Actions[action]; !ok {
		writeJSON(w, 400, map[string]string{"error": fmt.Sprintf("cannot hold %q: not an EC2 action the double serves", action)})
		return
	}
	s.mu.Lock()
	old := s.adminHolds[action]
	delete(s.adminHolds, action)
	s.mu.Unlock()
	if old != nil {
		old()
	}
	if r.Method == http.MethodPut {
		release := s.Hold(action)
		s.mu.Lock()
		if s.adminHolds == nil {
			s.adminHolds = map[string]func(){}
		}
		s.adminHolds[action] = release
		s.mu.Unlock()
	}
	writeJSON(w, 200, map[string]string{"action": action, "held": strconv.FormatBool(r.Method == http.MethodPut)})
}

// adminFailSnapshot is POST /_lab/snapshots/{id}/fail?after=DURATION.
func (s *Server) adminFailSnapshot(w http.ResponseWriter, r *http.Request, id string) {
	var after time.Duration
	if a := r.URL.Query().Get("after"); a != "" {
		d, err := time.ParseDuration(a)
		if err != nil || d < 0 {
			writeJSON(w, 400, map[string]string{"error": "want ?after=DURATION (non-negative)"})
			return
		}
		after = d
	}
	if err := s.FailSnapshot(id, after); err != nil {
		writeJSON(w, 400, map[string]string{"error": err.Error()})
		return
	}
	writeJSON(w, 200, map[string]string{"snapshot": id, "failsIn": after.String()})
}

// adminSetFaults is PUT /_lab/faults: the body replaces the faults; unknown fields and invalid
// values are refused.
func (s *Server) adminSetFaults(w http.ResponseWriter, r *http.Request) {
	var f Faults
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		writeJSON(w, 400, map[string]string{"error": err.Error()})
		return
	}
	if err := f.Validate(); err != nil {
		writeJSON(w, 400, map[string]string{"error": err.Error()})
		return
	}
	s.SetFaults(f)
	writeJSON(w, 200, s.Faults())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// CreateBucket creates bucket in the S3 of the double served at endpoint (PUT /{bucket}, as an
// S3 client does; creating it again succeeds).
func CreateBucket(ctx context.Context, endpoint, bucket string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, strings.TrimSuffix(endpoint, "/")+"/"+bucket, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("create bucket %s: %s", bucket, resp.Status)
	}
	return nil
}
