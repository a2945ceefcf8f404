package awsdouble

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

const ec2Namespace = "http://ec2.amazonaws.com/doc/2016-11-15/"

// apiError is an AWS error answer.
type apiError struct {
	Status  int
	Code    string
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func errf(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

func badParam(format string, args ...any) *apiError {
	return errf(400, "InvalidParameterValue", format, args...)
}

type ec2Handler func(s *Server, form url.Values) (any, *apiError)

var ec2Actions = map[string]ec2Handler{
	"DescribeInstances":            (*Server).describeInstances,
	"DescribeVolumes":              (*Server).describeVolumes,
	"DescribeSnapshots":            (*Server).describeSnapshots,
	"CreateSnapshots":              (*Server).createSnapshots,
	"DeleteSnapshot":               (*Server).deleteSnapshot,
	"CreateVolume":                 (*Server).createVolume,
	"DeleteVolume":                 (*Server).deleteVolume,
	"AttachVolume":                 (*Server).attachVolume,
	"DetachVolume":                 (*Server).detachVolume,
	"CreateTags":                   (*Server).createTags,
	"DeleteTags":                   (*Server).deleteTags,
	"EnableFastSnapshotRestores":   (*Server).enableFSR,
	"DisableFastSnapshotRestores":  (*Server).disableFSR,
	"DescribeFastSnapshotRestores": (*Server).describeFSR,
}

func (s *Server) serveEC2(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		writeEC2Error(w, errf(400, "MalformedQueryString", "%v", err))
		return
	}
	action := r.PostForm.Get("Action")
	h, ok := ec2Actions[action]
	if !ok {
		writeEC2Error(w, errf(400, "InvalidAction", "The action %s is not valid for this web service.", action))
		return
	}
	var aerr *apiError
	s.received(action)
	defer func() {
		code := ""
		if aerr != nil {
			code = aerr.Code
		}
		s.count(action, code)
	}()
	s.held(action)
	switch s.inject(action) {
	case faultThrottle:
		aerr = errf(503, "RequestLimitExceeded", "Request limit exceeded.")
		writeEC2Error(w, aerr)
		return
	case faultUnavailable:
		aerr = errf(503, "Unavailable", "The service is unavailable. Please try again shortly.")
		writeEC2Error(w, aerr)
		return
	}
	s.mu.Lock()
	if !s.allow("ec2/"+action, s.opts.Limits.ec2Rate(action)) {
		s.mu.Unlock()
		aerr = errf(503, "RequestLimitExceeded", "Request limit exceeded.")
		writeEC2Error(w, aerr)
		return
	}
	if r.PostForm.Get("DryRun") == "true" {
		s.mu.Unlock()
		aerr = errf(412, "DryRunOperation", "Request would have succeeded, but DryRun flag is set.")
		writeEC2Error(w, aerr)
		return
	}
	var out any
	out, aerr = h(s, r.PostForm)
	s.mu.Unlock()
	if s.dropResponse(action) {
		// The call ran; its answer is lost on the way back.
		hangUp(w)
		return
	}
	if aerr != nil {
		writeEC2Error(w, aerr)
		return
	}
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	_, _ = w.Write([]byte(xml.Header))
	enc := xml.NewEncoder(w)
	_ = enc.Encode(out)
}

type xmlErrorResponse struct {
	XMLName   xml.Name `xml:"Response"`
	Errors    []xmlErr `xml:"Errors>Error"`
	RequestID string   `xml:"RequestID"`
}

type xmlErr struct {
	Code    string `xml:"Code"`
	Message string `xml:"Message"`
}

func writeEC2Error(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
	w.WriteHeader(e.Status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(xmlErrorResponse{Errors: []xmlErr{{Code: e.Code, Message: e.Message}}, RequestID: requestID()})
}

// --- request parsing ---

// list returns the values of a flattened list parameter: prefix.1, prefix.2, ...
func list(form url.Values, prefix string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[prefix+"."+strconv.Itoa(i)]
		if !ok {
			return out
		}
		out = append(out, v[0])
	}
}

type filter struct {
	Name   string
	Values []string
}

func filters(form url.Values) []filter {
	var out []filter
	for i := 1; ; i++ {
		p := "Filter." + strconv.Itoa(i)
		name := form.Get(p + ".Name")
		if name == "" {
			return out
		}
		out = append(out, filter{Name: name, Values: list(form, p+".Value")})
	}
}

// tagSpecs returns the tags of the TagSpecification entries for resourceType.
func tagSpecs(form url.Values, resourceType string) map[string]string {
	tags := map[string]string{}
	for i := 1; ; i++ {
		p := "TagSpecification." + strconv.Itoa(i)
		rt := form.Get(p + ".ResourceType")
		if rt == "" {
			return tags
		}
		if rt != resourceType {
			continue
		}
		for k, v := range tagList(form, p+".Tag") {
			tags[k] = v
		}
	}
}

// Tag limits of EC2: "Tag your Amazon EC2 resources", Tag restrictions (Amazon EC2 User
// Guide): keys of at most 128 and values of at most 256 Unicode characters, and the aws:
// prefix reserved (the EC2 API Reference's Tag type says 127 for keys: the double takes the
// larger, so as not to be stricter than AWS). AWS answers a reserved key InvalidParameterValue
// "Value ( aws:… ) for parameter key is invalid. Tag keys starting with 'aws:' are reserved for
// internal use" (CreateTags, as quoted in AndrewFarley/AWS-Automated-Daily-Instance-AMI-
// Snapshots issue 7 and kubernetes-sigs/cluster-api-provider-aws PR 5461); the prefix is
// reserved in any case (awsdocs/amazon-ecs-developer-guide issue 72). A value over the limit
// is "Tag value exceeds the maximum length of 256 characters" (iriusrisk/GoCD-EC2-Elastic-
// Agent-Plugin issue 24); the double answers a key over the limit in the same words.
const (
	maxTagKeyChars   = 128
	maxTagValueChars = 256
)

// checkTags refuses tags EC2 does not take.
func checkTags(tags map[string]string) *apiError {
	for _, k := range sortedKeys(tags) {
		switch {
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return badParam("Value ( %s ) for parameter key is invalid. Tag keys starting with 'aws:' are reserved for internal use", k)
		case utf8.RuneCountInString(k) > maxTagKeyChars:
			return badParam("Tag key exceeds the maximum length of %d characters", maxTagKeyChars)
		case utf8.RuneCountInString(tags[k]) > maxTagValueChars:
			return badParam("Tag value exceeds the maximum length of %d characters", maxTagValueChars)
		}
	}
	return nil
}

func tagList(form url.Values, prefix string) map[string]string {
	tags := map[string]string{}
	for j := 1; ; j++ {
		q := prefix + "." + strconv.Itoa(j)
		k, ok := form[q+".Key"]
		if !ok {
			return tags
		}
		tags[k[0]] = form.Get(q + ".Value")
	}
}

// match reports whether a resource with attrs and tags passes all filters.
func match(fs []filter, attrs map[string]string, tags map[string]string) bool {
	for _, f := range fs {
		var v string
		var ok bool
		if k, isTag := strings.CutPrefix(f.Name, "tag:"); isTag {
			v, ok = tags[k]
		} else if f.Name == "tag-key" {
			found := false
			for k := range tags {
				found = found || slices.Contains(f.Values, k)
			}
			if !found {
				return false
			}
			continue
		} else {
			v, ok = attrs[f.Name]
		}
		if !ok || !slices.Contains(f.Values, v) {
			return false
		}
	}
	return true
}

// --- XML shapes ---

type xTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

type xTagSet struct {
	Items []xTag `xml:"item"`
}

func tagSet(tags map[string]string) *xTagSet {
	if len(tags) == 0 {
		return nil
	}
	ts := &xTagSet{}
	for _, k := range sortedKeys(tags) {
		ts.Items = append(ts.Items, xTag{Key: k, Value: tags[k]})
	}
	return ts
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// latest is the later of two times.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

type xSnapshot struct {
	SnapshotID    string `xml:"snapshotId"`
	VolumeID      string `xml:"volumeId"`
	State         string `xml:"state,omitempty"`
	Status        string `xml:"status,omitempty"`
	StatusMessage string `xml:"statusMessage,omitempty"`
	StartTime     string `xml:"startTime"`
	// CompletionTime is set once the snapshot completed, as EC2 sets it.
	CompletionTime string   `xml:"completionTime,omitempty"`
	Progress       string   `xml:"progress"`
	OwnerID        string   `xml:"ownerId"`
	VolumeSize     int32    `xml:"volumeSize"`
	Description    string   `xml:"description,omitempty"`
	Encrypted      bool     `xml:"encrypted"`
	KmsKeyID       string   `xml:"kmsKeyId,omitempty"`
	FullSize       *int64   `xml:"fullSnapshotSizeInBytes,omitempty"`
	TagSet         *xTagSet `xml:"tagSet,omitempty"`
}

type xSnapshotSet struct {
	Items []xSnapshot `xml:"item"`
}

type xAttachment struct {
	VolumeID   string `xml:"volumeId"`
	InstanceID string `xml:"instanceId"`
	Device     string `xml:"device"`
	Status     string `xml:"status"`
	AttachTime string `xml:"attachTime"`
	DeleteOnT  bool   `xml:"deleteOnTermination"`
}

type xVolume struct {
	VolumeID    string `xml:"volumeId"`
	Size        int32  `xml:"size"`
	SnapshotID  string `xml:"snapshotId"`
	AZ          string `xml:"availabilityZone"`
	Status      string `xml:"status"`
	CreateTime  string `xml:"createTime"`
	Attachments struct {
		Items []xAttachment `xml:"item"`
	} `xml:"attachmentSet"`
	TagSet       *xTagSet `xml:"tagSet,omitempty"`
	VolumeType   string   `xml:"volumeType"`
	Iops         int32    `xml:"iops,omitempty"`
	Throughput   int32    `xml:"throughput,omitempty"`
	Encrypted    bool     `xml:"encrypted"`
	KmsKeyID     string   `xml:"kmsKeyId,omitempty"`
	FastRestored bool     `xml:"fastRestored"`
}

func (s *Server) xvolume(v *Volume) xVolume {
	x := xVolume{
		VolumeID: v.ID, Size: v.SizeGiB, SnapshotID: v.SnapshotID, AZ: v.AZ,
		Status: volumeState(v, s.now()), CreateTime: ts(v.Created), TagSet: tagSet(v.Tags),
		VolumeType: v.Type, Iops: v.IOPS, Throughput: v.Throughput, Encrypted: v.Encrypted,
		KmsKeyID: v.KMSKeyID, FastRestored: v.FastRestored,
	}
	if v.InstanceID != "" {
		x.Attachments.Items = []xAttachment{{VolumeID: v.ID, InstanceID: v.InstanceID, Device: v.Device, Status: "attached", AttachTime: ts(v.AttachTime)}}
	}
	return x
}

func (s *Server) xsnapshot(sn *Snapshot, forCreate bool) xSnapshot {
	st, progress := s.state(sn)
	x := xSnapshot{
		SnapshotID: sn.ID, VolumeID: sn.VolumeID, StartTime: ts(sn.Started),
		Progress: fmt.Sprintf("%d%%", int(progress)), OwnerID: s.ownerOf(sn),
		VolumeSize: sn.SizeGiB, Description: sn.Description, Encrypted: sn.Encrypted,
		KmsKeyID: sn.KMSKeyID, TagSet: tagSet(s.visibleTags(sn)),
	}
	if forCreate {
		x.State = st
	} else {
		x.Status = st
	}
	if st == "error" {
		x.StatusMessage = "Snapshot failed (injected fault)"
	}
	if st == "completed" && !forCreate {
		// Completed once its time came and its block map was ready (see state).
		x.CompletionTime = ts(latest(sn.CompleteAt, s.blockSetFor(sn).doneAt))
	}
	if st == "completed" && !s.opts.OmitFullSnapshotSize && !forCreate {
		if bs := s.blockSetFor(sn); bs.err == nil {
			n := int64(len(bs.blocks)) * BlockSize
			x.FullSize = &n
		}
	}
	return x
}

// --- actions ---

type describeInstancesResponse struct {
	XMLName      xml.Name `xml:"DescribeInstancesResponse"`
	Xmlns        string   `xml:"xmlns,attr"`
	RequestID    string   `xml:"requestId"`
	Reservations struct {
		Items []xReservation `xml:"item"`
	} `xml:"reservationSet"`
}

type xReservation struct {
	ReservationID string `xml:"reservationId"`
	OwnerID       string `xml:"ownerId"`
	Instances     struct {
		Items []xInstance `xml:"item"`
	} `xml:"instancesSet"`
}

type xInstance struct {
	InstanceID string `xml:"instanceId"`
	State      struct {
		Code int    `xml:"code"`
		Name string `xml:"name"`
	} `xml:"instanceState"`
	Placement struct {
		AZ string `xml:"availabilityZone"`
	} `xml:"placement"`
	RootDeviceType string `xml:"rootDeviceType"`
	RootDeviceName string `xml:"rootDeviceName"`
	BlockDevices   struct {
		Items []xBlockDevice `xml:"item"`
	} `xml:"blockDeviceMapping"`
	TagSet *xTagSet `xml:"tagSet,omitempty"`
}

type xBlockDevice struct {
	DeviceName string `xml:"deviceName"`
	EBS        struct {
		VolumeID   string `xml:"volumeId"`
		Status     string `xml:"status"`
		AttachTime string `xml:"attachTime"`
	} `xml:"ebs"`
}

func (s *Server) describeInstances(form url.Values) (any, *apiError) {
	ids := list(form, "InstanceId")
	if len(ids) == 0 {
		ids = sortedKeys(s.st.Instances)
	}
	fs := filters(form)
	resp := describeInstancesResponse{Xmlns: ec2Namespace, RequestID: requestID()}
	for _, id := range ids {
		in, ok := s.st.Instances[id]
		if !ok {
			return nil, errf(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
		if !match(fs, map[string]string{"instance-id": in.ID, "availability-zone": in.AZ}, in.Tags) {
			continue
		}
		x := xInstance{InstanceID: in.ID, RootDeviceType: "ebs", RootDeviceName: in.RootDevice, TagSet: tagSet(in.Tags)}
		x.State.Code, x.State.Name = 16, "running"
		x.Placement.AZ = in.AZ
		for _, v := range s.attached(in.ID) {
			bd := xBlockDevice{DeviceName: v.Device}
			bd.EBS.VolumeID, bd.EBS.Status, bd.EBS.AttachTime = v.ID, "attached", ts(v.AttachTime)
			x.BlockDevices.Items = append(x.BlockDevices.Items, bd)
		}
		resp.Reservations.Items = append(resp.Reservations.Items, xReservation{
			ReservationID: "r-" + in.ID[2:], OwnerID: s.opts.AccountID,
			Instances: struct {
				Items []xInstance `xml:"item"`
			}{Items: []xInstance{x}},
		})
	}
	return resp, nil
}

// attached lists the volumes attached to an instance, by device name.
func (s *Server) attached(instanceID string) []*Volume {
	var out []*Volume
	for _, v := range s.st.Volumes {
		if v.InstanceID == instanceID {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b *Volume) int { return strings.Compare(a.Device, b.Device) })
	return out
}

type describeVolumesResponse struct {
	XMLName   xml.Name `xml:"DescribeVolumesResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	Volumes   struct {
		Items []xVolume `xml:"item"`
	} `xml:"volumeSet"`
	NextToken string `xml:"nextToken,omitempty"`
}

func (s *Server) describeVolumes(form url.Values) (any, *apiError) {
	ids := list(form, "VolumeId")
	explicit := len(ids) > 0
	if !explicit {
		ids = sortedKeys(s.st.Volumes)
	}
	fs := filters(form)
	var items []xVolume
	for _, id := range ids {
		v, ok := s.volumeByID(id)
		if !ok && !explicit {
			continue // a listing leaves out what is not visible yet
		}
		if !ok {
			return nil, errf(400, "InvalidVolume.NotFound", "The volume '%s' does not exist.", id)
		}
		attrs := map[string]string{"volume-id": v.ID, "availability-zone": v.AZ, "status": volumeState(v, s.now()),
			"attachment.instance-id": v.InstanceID, "snapshot-id": v.SnapshotID}
		if match(fs, attrs, v.Tags) {
			items = append(items, s.xvolume(v))
		}
	}
	resp := describeVolumesResponse{Xmlns: ec2Namespace, RequestID: requestID()}
	page, next, aerr := paginate(form, len(items))
	if aerr != nil {
		return nil, aerr
	}
	resp.Volumes.Items, resp.NextToken = items[page[0]:page[1]], next
	return resp, nil
}

// paginate returns the [from, to) window of n items for MaxResults/NextToken.
func paginate(form url.Values, n int) ([2]int, string, *apiError) {
	from := 0
	if tok := form.Get("NextToken"); tok != "" {
		v, err := strconv.Atoi(tok)
		if err != nil || v < 0 || v > n {
			return [2]int{}, "", errf(400, "InvalidNextToken", "The token '%s' is invalid.", tok)
		}
		from = v
	}
	to := n
	if m := form.Get("MaxResults"); m != "" {
		v, err := strconv.Atoi(m)
		if err != nil || v < 5 || v > 1000 {
			return [2]int{}, "", badParam("MaxResults must be between 5 and 1000")
		}
		to = min(n, from+v)
	}
	next := ""
	if to < n {
		next = strconv.Itoa(to)
	}
	return [2]int{from, to}, next, nil
}

type describeSnapshotsResponse struct {
	XMLName   xml.Name     `xml:"DescribeSnapshotsResponse"`
	Xmlns     string       `xml:"xmlns,attr"`
	RequestID string       `xml:"requestId"`
	Snapshots xSnapshotSet `xml:"snapshotSet"`
	NextToken string       `xml:"nextToken,omitempty"`
}

func (s *Server) describeSnapshots(form url.Values) (any, *apiError) {
	ids := list(form, "SnapshotId")
	explicit := len(ids) > 0
	if !explicit {
		ids = sortedKeys(s.st.Snapshots)
	}
	fs := filters(form)
	// OwnerIds (Owner.N): "self" is the caller's account, anything else an account id.
	owners := list(form, "Owner")
	for i, o := range owners {
		if o == "self" {
			owners[i] = s.opts.AccountID
		}
	}
	var items []xSnapshot
	for _, id := range ids {
		sn, ok := s.snapshotByID(id)
		if !ok && !explicit {
			continue // a listing leaves out what is not visible yet
		}
		if !ok {
			return nil, errf(400, "InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id)
		}
		if len(owners) > 0 && !slices.Contains(owners, s.ownerOf(sn)) {
			continue
		}
		st, _ := s.state(sn)
		attrs := map[string]string{"snapshot-id": sn.ID, "volume-id": sn.VolumeID, "status": st, "owner-id": s.ownerOf(sn)}
		if match(fs, attrs, s.visibleTags(sn)) {
			items = append(items, s.xsnapshot(sn, false))
		}
	}
	page, next, aerr := paginate(form, len(items))
	if aerr != nil {
		return nil, aerr
	}
	resp := describeSnapshotsResponse{Xmlns: ec2Namespace, RequestID: requestID(), NextToken: next}
	resp.Snapshots.Items = items[page[0]:page[1]]
	return resp, nil
}

type createSnapshotsResponse struct {
	XMLName   xml.Name     `xml:"CreateSnapshotsResponse"`
	Xmlns     string       `xml:"xmlns,attr"`
	RequestID string       `xml:"requestId"`
	Snapshots xSnapshotSet `xml:"snapshotSet"`
}

// pendingCount is the number of pending snapshots at now.
func (s *Server) pendingCount() int {
	n := 0
	for _, sn := range s.st.Snapshots {
		if st, _ := s.state(sn); st == "pending" {
			n++
		}
	}
	return n
}

func (s *Server) createSnapshots(form url.Values) (any, *apiError) {
	instanceID := form.Get("InstanceSpecification.InstanceId")
	if instanceID == "" {
		return nil, errf(400, "MissingParameter", "The request must contain the parameter InstanceSpecification.InstanceId")
	}
	in, ok := s.st.Instances[instanceID]
	if !ok {
		return nil, errf(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", instanceID)
	}
	excludeBoot := form.Get("InstanceSpecification.ExcludeBootVolume") == "true"
	exclude := list(form, "InstanceSpecification.ExcludeDataVolumeId")
	var vols []*Volume
	for _, v := range s.attached(instanceID) {
		if (excludeBoot && v.Device == in.RootDevice) || slices.Contains(exclude, v.ID) {
			continue
		}
		vols = append(vols, v)
	}
	for _, id := range exclude {
		if v, ok := s.st.Volumes[id]; !ok || v.InstanceID != instanceID {
			return nil, badParam("Volume %s is not attached to instance %s", id, instanceID)
		}
	}
	if len(vols) == 0 {
		return nil, badParam("No volumes to snapshot for instance %s", instanceID)
	}
	if err := s.snapshotQuotas(vols); err != nil {
		return nil, err
	}
	extra := tagSpecs(form, "snapshot")
	if aerr := checkTags(extra); aerr != nil {
		return nil, aerr
	}
	copyTags := form.Get("CopyTagsFromSource") == "volume"
	snaps := make([]*Snapshot, len(vols))
	ids := make([]string, len(vols))
	for i, v := range vols {
		tags := map[string]string{}
		if copyTags {
			for k, val := range v.Tags {
				tags[k] = val
			}
		}
		for k, val := range extra {
			tags[k] = val
		}
		if len(tags) > 50 {
			return nil, errf(400, "TagLimitExceeded", "The maximum number of tags per resource (50) was exceeded for a snapshot of %s", v.ID)
		}
		ids[i] = newID("snap-")
		snaps[i] = &Snapshot{ID: ids[i], VolumeID: v.ID, SizeGiB: v.SizeGiB, Encrypted: v.Encrypted, KMSKeyID: v.KMSKeyID,
			Description: form.Get("Description"), Tags: tags}
	}
	files, images, err := s.captureAll(vols, ids)
	if err != nil {
		for _, id := range ids {
			s.removeSnapshotStorage(id)
		}
		return nil, errf(500, "InternalError", "capture: %v", err)
	}
	now := s.now()
	resp := createSnapshotsResponse{Xmlns: ec2Namespace, RequestID: requestID()}
	for _, sn := range snaps {
		sn.Files = files[sn.VolumeID]
		for _, f := range sn.Files {
			sn.Bytes += f.Length
		}
		if n, ok := images[sn.VolumeID]; ok {
			sn.Image, sn.Bytes = true, n
		}
		sn.Started = now
		secs := float64(sn.Bytes) / (s.opts.SnapshotMBps * 1e6)
		sn.CompleteAt = now.Add(s.opts.SnapshotBaseDuration + time.Duration(secs*float64(time.Second)))
		if slices.Contains(s.faults.SnapshotErrorVolumes, sn.VolumeID) {
			sn.Failed = true
		} else if s.faults.SnapshotErrors > 0 {
			s.faults.SnapshotErrors--
			s.st.SnapshotErrorsUsed++
			sn.Failed = true
		}
		if sn.Failed {
			sn.FailAt = now.Add(time.Duration(s.faults.SnapshotErrorAfter))
		}
		sn.VisibleAt = s.visibleAt(now)
		s.st.Snapshots[sn.ID] = sn
		if v := s.st.Volumes[sn.VolumeID]; v != nil {
			v.LastSnapshot = now
		}
		s.blockSetFor(sn)
		x := s.xsnapshot(sn, true)
		x.State = "pending"
		x.Progress = ""
		resp.Snapshots.Items = append(resp.Snapshots.Items, x)
	}
	s.stats.MaxPending = max(s.stats.MaxPending, s.pendingCount())
	s.markDirty()
	return resp, nil
}

// snapshotQuotas refuses snapshots of vols beyond the account's pending-snapshot quota or within
// AWS's per-volume interval since a volume's previous snapshot.
func (s *Server) snapshotQuotas(vols []*Volume) *apiError {
	if s.opts.Unlimited {
		return nil
	}
	if max := s.opts.Limits.PendingSnapshots; max > 0 && s.pendingCount()+len(vols) > max {
		return errf(400, "PendingSnapshotLimitExceeded", "The maximum number of pending snapshots (%d) has been reached.", max)
	}
	if every := s.opts.Limits.SnapshotVolumeInterval; every > 0 {
		now := s.now()
		for _, v := range vols {
			if !v.LastSnapshot.IsZero() && now.Before(v.LastSnapshot.Add(every)) {
				return errf(400, "SnapshotCreationPerVolumeRateExceeded",
					"The maximum per volume CreateSnapshot request rate has been exceeded for %s. Use an increasing or variable sleep interval between requests.", v.ID)
			}
		}
	}
	return nil
}

type boolResponse struct {
	XMLName   xml.Name
	Xmlns     string `xml:"xmlns,attr"`
	RequestID string `xml:"requestId"`
	Return    bool   `xml:"return"`
}

func okResponse(action string) boolResponse {
	return boolResponse{XMLName: xml.Name{Local: action + "Response"}, Xmlns: ec2Namespace, RequestID: requestID(), Return: true}
}

// ownerOf is the account owning sn.
func (s *Server) ownerOf(sn *Snapshot) string {
	if sn.OwnerID != "" {
		return sn.OwnerID
	}
	return s.opts.AccountID
}

// foreign says sn belongs to another account (shared with this one).
func (s *Server) foreign(sn *Snapshot) bool { return s.ownerOf(sn) != s.opts.AccountID }

// visibleTags are the tags of sn this account sees: tags belong to the account that set them,
// so a snapshot another account shares shows none of its owner's.
func (s *Server) visibleTags(sn *Snapshot) map[string]string {
	if s.foreign(sn) {
		return nil
	}
	return sn.Tags
}

func unauthorized() *apiError {
	return errf(403, "UnauthorizedOperation", "You are not authorized to perform this operation.")
}

func (s *Server) deleteSnapshot(form url.Values) (any, *apiError) {
	id := form.Get("SnapshotId")
	sn, ok := s.snapshotByID(id)
	if !ok {
		return nil, errf(400, "InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id)
	}
	if s.foreign(sn) {
		return nil, unauthorized()
	}
	// Volumes keep their own copy of the data, so a snapshot with volumes can be deleted.
	for _, f := range s.st.FSR {
		if f.SnapshotID == id && !f.Disabled {
			return nil, errf(400, "InvalidSnapshot.InUse", "The snapshot %s has fast snapshot restores enabled.", id)
		}
	}
	delete(s.st.Snapshots, id)
	delete(s.blocks, id)
	s.removeSnapshotStorage(id)
	s.markDirty()
	return okResponse("DeleteSnapshot"), nil
}

type createVolumeResponse struct {
	XMLName   xml.Name `xml:"CreateVolumeResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	xVolume
}

func (s *Server) validAZ(az string) bool {
	return strings.HasPrefix(az, s.opts.Region) && len(az) == len(s.opts.Region)+1
}

// defaultKMSKey is the account's default EBS key.
func (s *Server) defaultKMSKey() string {
	return fmt.Sprintf("arn:aws:kms:%s:%s:key/aws-ebs-default", s.opts.Region, s.opts.AccountID)
}

// volumeSettings applies type, IOPS, throughput and encryption from a CreateVolume request.
func (s *Server) volumeSettings(form url.Values, v *Volume) *apiError {
	if v.Type == "" {
		v.Type = "gp2"
	}
	if !slices.Contains([]string{"gp2", "gp3", "io1", "io2", "st1", "sc1", "standard"}, v.Type) {
		return badParam("The parameter VolumeType has an invalid value: %s", v.Type)
	}
	if x := form.Get("Iops"); x != "" {
		n, _ := strconv.Atoi(x)
		if v.Type != "gp3" && v.Type != "io1" && v.Type != "io2" {
			return errf(400, "InvalidParameterCombination", "The parameter iops is not supported for %s volumes.", v.Type)
		}
		v.IOPS = int32(n)
	} else if v.Type == "io1" || v.Type == "io2" {
		return errf(400, "MissingParameter", "The request must contain the parameter iops")
	}
	if x := form.Get("Throughput"); x != "" {
		n, _ := strconv.Atoi(x)
		if v.Type != "gp3" {
			return errf(400, "InvalidParameterCombination", "The parameter throughput is only supported for gp3 volumes.")
		}
		if n < 125 || n > 2000 {
			return badParam("Throughput %d MiB/s is out of range", n)
		}
		v.Throughput = int32(n)
	}
	if v.Type == "gp3" {
		if v.IOPS == 0 {
			v.IOPS = 3000
		}
		if v.Throughput == 0 {
			v.Throughput = 125
		}
	}
	v.Encrypted = form.Get("Encrypted") == "true"
	if k := form.Get("KmsKeyId"); k != "" {
		if !v.Encrypted {
			return errf(400, "InvalidParameterDependency", "The parameter KmsKeyId requires the parameter Encrypted to be set.")
		}
		v.KMSKeyID = k
	}
	return nil
}

// volumeSource applies the SnapshotId of a CreateVolume request, if any.
func (s *Server) volumeSource(form url.Values, v *Volume) (*Snapshot, *apiError) {
	var sn *Snapshot
	if id := form.Get("SnapshotId"); id != "" {
		var ok bool
		sn, ok = s.snapshotByID(id)
		if !ok {
			return nil, errf(400, "InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id)
		}
		if st, _ := s.state(sn); st != "completed" {
			return nil, errf(400, "IncorrectState", "Snapshot '%s' is not 'completed'.", id)
		}
		v.SnapshotID = id
		v.SizeGiB = sn.SizeGiB
		if sn.Encrypted {
			v.Encrypted = true
			if v.KMSKeyID == "" {
				v.KMSKeyID = sn.KMSKeyID
			}
		}
	}
	if v.Encrypted && v.KMSKeyID == "" {
		v.KMSKeyID = s.defaultKMSKey()
	}
	return sn, nil
}

func (s *Server) createVolume(form url.Values) (any, *apiError) {
	token := form.Get("ClientToken")
	if id, ok := s.st.ClientTokens[token]; ok && token != "" {
		if v, ok := s.st.Volumes[id]; ok {
			return createVolumeResponse{Xmlns: ec2Namespace, RequestID: requestID(), xVolume: s.xvolume(v)}, nil
		}
	}
	az := form.Get("AvailabilityZone")
	if az == "" {
		return nil, errf(400, "MissingParameter", "The request must contain the parameter AvailabilityZone")
	}
	if !s.validAZ(az) {
		return nil, badParam("Invalid availability zone: [%s]", az)
	}
	v := &Volume{ID: newID("vol-"), AZ: az, Type: form.Get("VolumeType"), Created: s.now()}
	if aerr := s.volumeSettings(form, v); aerr != nil {
		return nil, aerr
	}
	sn, aerr := s.volumeSource(form, v)
	if aerr != nil {
		return nil, aerr
	}
	if x := form.Get("Size"); x != "" {
		n, err := strconv.Atoi(x)
		if err != nil || n < 1 || n > 65536 {
			return nil, badParam("Invalid size %q", x)
		}
		if sn != nil && int32(n) < sn.SizeGiB {
			return nil, badParam("Volume of %d GiB is smaller than snapshot %s (%d GiB)", n, sn.ID, sn.SizeGiB)
		}
		v.SizeGiB = int32(n)
	}
	if v.SizeGiB == 0 {
		return nil, errf(400, "MissingParameter", "The request must contain the parameter size or snapshotId")
	}
	v.Tags = tagSpecs(form, "volume")
	if aerr := checkTags(v.Tags); aerr != nil {
		return nil, aerr
	}
	if len(v.Tags) > 50 {
		return nil, errf(400, "TagLimitExceeded", "The maximum number of tags per resource (50) was exceeded.")
	}
	if err := s.makeVolumeStorage(v, sn); err != nil {
		s.removeVolumeStorage(v)
		return nil, errf(500, "InternalError", "%v", err)
	}
	if sn != nil {
		if f, ok := s.st.FSR[sn.ID+"/"+az]; ok {
			st := s.fsrState(f, sn.SizeGiB, s.now())
			if (st == "enabled" || st == "optimizing") && s.credits(f, sn.SizeGiB, s.now()) >= 1 {
				f.Credits--
				v.FastRestored = true
			}
		}
	}
	v.AvailableAt = v.Created.Add(s.opts.VolumeCreateDuration)
	v.VisibleAt = s.visibleAt(v.Created)
	s.st.Volumes[v.ID] = v
	if token != "" {
		s.st.ClientTokens[token] = v.ID
	}
	if sn != nil {
		s.stats.VolumesFromSnapshots++
	}
	s.markDirty()
	x := s.xvolume(v)
	x.Status = "creating"
	return createVolumeResponse{Xmlns: ec2Namespace, RequestID: requestID(), xVolume: x}, nil
}

func (s *Server) deleteVolume(form url.Values) (any, *apiError) {
	id := form.Get("VolumeId")
	v, ok := s.volumeByID(id)
	if !ok {
		return nil, errf(400, "InvalidVolume.NotFound", "The volume '%s' does not exist.", id)
	}
	if v.InstanceID != "" {
		return nil, errf(400, "VolumeInUse", "Volume %s is currently attached to %s", id, v.InstanceID)
	}
	delete(s.st.Volumes, id)
	s.removeVolumeStorage(v)
	s.markDirty()
	return okResponse("DeleteVolume"), nil
}

type attachResponse struct {
	XMLName    xml.Name
	Xmlns      string `xml:"xmlns,attr"`
	RequestID  string `xml:"requestId"`
	VolumeID   string `xml:"volumeId"`
	InstanceID string `xml:"instanceId"`
	Device     string `xml:"device"`
	Status     string `xml:"status"`
	AttachTime string `xml:"attachTime"`
}

func (s *Server) attachVolume(form url.Values) (any, *apiError) {
	v, ok := s.volumeByID(form.Get("VolumeId"))
	if !ok {
		return nil, errf(400, "InvalidVolume.NotFound", "The volume '%s' does not exist.", form.Get("VolumeId"))
	}
	in, ok := s.st.Instances[form.Get("InstanceId")]
	if !ok {
		return nil, errf(400, "InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", form.Get("InstanceId"))
	}
	if v.AZ != in.AZ {
		return nil, errf(400, "InvalidVolume.ZoneMismatch", "The volume '%s' is not in the same availability zone as instance '%s'", v.ID, in.ID)
	}
	if volumeState(v, s.now()) != "available" {
		return nil, errf(400, "IncorrectState", "vol '%s' is not 'available'.", v.ID)
	}
	dev := form.Get("Device")
	for _, other := range s.attached(in.ID) {
		if other.Device == dev {
			return nil, badParam("Invalid value '%s' for unixDevice. Attachment point %s is already in use", dev, dev)
		}
	}
	v.InstanceID, v.Device, v.AttachTime = in.ID, dev, s.now()
	s.markDirty()
	return attachResponse{XMLName: xml.Name{Local: "AttachVolumeResponse"}, Xmlns: ec2Namespace, RequestID: requestID(),
		VolumeID: v.ID, InstanceID: in.ID, Device: dev, Status: "attaching", AttachTime: ts(v.AttachTime)}, nil
}

func (s *Server) detachVolume(form url.Values) (any, *apiError) {
	v, ok := s.volumeByID(form.Get("VolumeId"))
	if !ok {
		return nil, errf(400, "InvalidVolume.NotFound", "The volume '%s' does not exist.", form.Get("VolumeId"))
	}
	if v.InstanceID == "" {
		return nil, errf(400, "IncorrectState", "Volume '%s' is in the 'available' state.", v.ID)
	}
	resp := attachResponse{XMLName: xml.Name{Local: "DetachVolumeResponse"}, Xmlns: ec2Namespace, RequestID: requestID(),
		VolumeID: v.ID, InstanceID: v.InstanceID, Device: v.Device, Status: "detaching", AttachTime: ts(v.AttachTime)}
	v.InstanceID, v.Device = "", ""
	s.markDirty()
	return resp, nil
}

func (s *Server) createTags(form url.Values) (any, *apiError) {
	ids := list(form, "ResourceId")
	tags := tagList(form, "Tag")
	if aerr := checkTags(tags); aerr != nil {
		return nil, aerr
	}
	for _, id := range ids {
		var target *map[string]string
		v, isVol := s.volumeByID(id)
		sn, isSnap := s.snapshotByID(id)
		switch {
		case isVol:
			target = &v.Tags
		case isSnap && s.foreign(sn):
			return nil, unauthorized()
		case isSnap:
			target = &sn.Tags
		case s.st.Instances[id] != nil:
			target = &s.st.Instances[id].Tags
		default:
			return nil, errf(400, "InvalidID", "The ID '%s' is not valid", id)
		}
		merged := map[string]string{}
		for k, v := range *target {
			merged[k] = v
		}
		for k, v := range tags {
			merged[k] = v
		}
		if len(merged) > 50 {
			return nil, errf(400, "TagLimitExceeded", "The maximum number of tags per resource (50) was exceeded for %s", id)
		}
		*target = merged
	}
	s.markDirty()
	return okResponse("CreateTags"), nil
}

// deleteTags removes tags as AWS does: a tag given with a value only when the resource's value
// matches, one given by key alone whatever its value, every tag when none is given; a tag the
// resource does not carry is no error.
func (s *Server) deleteTags(form url.Values) (any, *apiError) {
	ids := list(form, "ResourceId")
	if len(ids) == 0 {
		return nil, errf(400, "MissingParameter", "The request must contain the parameter resourceIdSet")
	}
	type del struct {
		key, value string
		byValue    bool
	}
	var dels []del
	for j := 1; ; j++ {
		q := "Tag." + strconv.Itoa(j)
		k, ok := form[q+".Key"]
		if !ok {
			break
		}
		v, byValue := form[q+".Value"]
		d := del{key: k[0], byValue: byValue}
		if byValue {
			d.value = v[0]
		}
		dels = append(dels, d)
	}
	targets := make([]*map[string]string, len(ids))
	for i, id := range ids {
		v, isVol := s.volumeByID(id)
		sn, isSnap := s.snapshotByID(id)
		switch {
		case isVol:
			targets[i] = &v.Tags
		case isSnap && s.foreign(sn):
			return nil, unauthorized()
		case isSnap:
			targets[i] = &sn.Tags
		case s.st.Instances[id] != nil:
			targets[i] = &s.st.Instances[id].Tags
		case strings.HasPrefix(id, "snap-"):
			return nil, errf(400, "InvalidSnapshot.NotFound", "The snapshot '%s' does not exist.", id)
		case strings.HasPrefix(id, "vol-"):
			return nil, errf(400, "InvalidVolume.NotFound", "The volume '%s' does not exist.", id)
		default:
			return nil, errf(400, "InvalidID", "The ID '%s' is not valid", id)
		}
	}
	for _, target := range targets {
		if len(dels) == 0 {
			*target = map[string]string{}
			continue
		}
		kept := map[string]string{}
		for k, v := range *target {
			kept[k] = v
		}
		for _, d := range dels {
			if v, ok := kept[d.key]; ok && (!d.byValue || v == d.value) {
				delete(kept, d.key)
			}
		}
		*target = kept
	}
	s.markDirty()
	return okResponse("DeleteTags"), nil
}

// --- fast snapshot restore ---

type xFSRItem struct {
	SnapshotID   string `xml:"snapshotId"`
	AZ           string `xml:"availabilityZone"`
	State        string `xml:"state"`
	OwnerID      string `xml:"ownerId"`
	EnablingTime string `xml:"enablingTime,omitempty"`
}

type xFSRError struct {
	SnapshotID string `xml:"snapshotId"`
	Errors     struct {
		Items []xFSRStateError `xml:"item"`
	} `xml:"fastSnapshotRestoreStateErrorSet"`
}

type xFSRStateError struct {
	AZ    string `xml:"availabilityZone"`
	Error struct {
		Code    string `xml:"code"`
		Message string `xml:"message"`
	} `xml:"error"`
}

type fsrResponse struct {
	XMLName    xml.Name
	Xmlns      string `xml:"xmlns,attr"`
	RequestID  string `xml:"requestId"`
	Successful struct {
		Items []xFSRItem `xml:"item"`
	} `xml:"successful"`
	Unsuccessful struct {
		Items []xFSRError `xml:"item"`
	} `xml:"unsuccessful"`
}

func (s *Server) fsrBatch(form url.Values, action string, enable bool) (any, *apiError) {
	ids := list(form, "SourceSnapshotId")
	azs := list(form, "AvailabilityZone")
	if len(ids) == 0 || len(azs) == 0 {
		return nil, errf(400, "MissingParameter", "The request must contain SourceSnapshotIds and AvailabilityZones")
	}
	if len(ids) > 10 {
		return nil, badParam("The number of SourceSnapshotIds must be less than or equal to 10, got %d", len(ids))
	}
	resp := fsrResponse{XMLName: xml.Name{Local: action + "Response"}, Xmlns: ec2Namespace, RequestID: requestID()}
	now := s.now()
	for _, id := range ids {
		sn, ok := s.snapshotByID(id)
		for _, az := range azs {
			if !ok || !s.validAZ(az) {
				resp.refuse(id, az, "InvalidSnapshot.NotFound", "The snapshot does not exist or the AZ is invalid")
				continue
			}
			if enable {
				if code, msg := s.fsrRefusal(sn); code != "" {
					resp.refuse(id, az, code, msg)
					continue
				}
			}
			key := id + "/" + az
			f := s.st.FSR[key]
			if enable {
				if f == nil || f.Disabled {
					f = &FSR{SnapshotID: id, AZ: az, EnabledAt: now, CreditsAt: now}
					s.st.FSR[key] = f
				}
			} else if f != nil {
				f.Disabled = true
			}
			state := "disabling"
			if f != nil && enable {
				state = s.fsrState(f, sn.SizeGiB, now)
			}
			resp.Successful.Items = append(resp.Successful.Items, xFSRItem{SnapshotID: id, AZ: az, State: state, OwnerID: s.opts.AccountID})
		}
	}
	s.markDirty()
	return resp, nil
}

// refuse answers one snapshot-AZ pair of an FSR call in Unsuccessful.
func (r *fsrResponse) refuse(id, az, code, msg string) {
	e := xFSRError{SnapshotID: id}
	se := xFSRStateError{AZ: az}
	se.Error.Code, se.Error.Message = code, msg
	e.Errors.Items = append(e.Errors.Items, se)
	r.Unsuccessful.Items = append(r.Unsuccessful.Items, e)
}

// Codes of the Unsuccessful items of EnableFastSnapshotRestores the limits give. AWS documents
// the limits (DefaultLimits) but not the code and message of such an item
// (API_EnableFastSnapshotRestoreStateError: "The error code", "The error message"): these are
// the double's own words, and fedbr must not depend on them (it takes every Unsuccessful item
// as "this snapshot goes without FSR", with its code and message as the reason).
const (
	FSRQuotaExceeded    = "FastSnapshotRestoreQuotaExceeded"
	FSRSnapshotTooLarge = "FastSnapshotRestoreSnapshotTooLarge"
)

// fsrRefusal is why FSR cannot be enabled for sn (a code and message), or "" when it can:
// a snapshot over the size limit, or one more snapshot than the account-region's quota. A
// snapshot already enabled in some AZ holds its place in the quota for any other AZ.
func (s *Server) fsrRefusal(sn *Snapshot) (string, string) {
	l := s.opts.Limits
	if l.FSRMaxSnapshotGiB > 0 && sn.SizeGiB > l.FSRMaxSnapshotGiB {
		return FSRSnapshotTooLarge, fmt.Sprintf("Snapshot %s is %d GiB; fast snapshot restore can be enabled on snapshots of at most %d GiB.", sn.ID, sn.SizeGiB, l.FSRMaxSnapshotGiB)
	}
	if s.opts.Unlimited || l.FSRSnapshots <= 0 {
		return "", ""
	}
	enabled := s.fsrSnapshots()
	if !enabled[sn.ID] && len(enabled) >= l.FSRSnapshots {
		return FSRQuotaExceeded, fmt.Sprintf("The maximum number of snapshots enabled for fast snapshot restore in this Region (%d) has been reached.", l.FSRSnapshots)
	}
	return "", ""
}

// fsrSnapshots are the snapshots with fast snapshot restore enabled (not disabled) in any AZ.
func (s *Server) fsrSnapshots() map[string]bool {
	out := map[string]bool{}
	for _, f := range s.st.FSR {
		if !f.Disabled {
			out[f.SnapshotID] = true
		}
	}
	return out
}

func (s *Server) enableFSR(form url.Values) (any, *apiError) {
	return s.fsrBatch(form, "EnableFastSnapshotRestores", true)
}

func (s *Server) disableFSR(form url.Values) (any, *apiError) {
	return s.fsrBatch(form, "DisableFastSnapshotRestores", false)
}

type describeFSRResponse struct {
	XMLName   xml.Name `xml:"DescribeFastSnapshotRestoresResponse"`
	Xmlns     string   `xml:"xmlns,attr"`
	RequestID string   `xml:"requestId"`
	Set       struct {
		Items []xFSRItem `xml:"item"`
	} `xml:"fastSnapshotRestoreSet"`
}

func (s *Server) describeFSR(form url.Values) (any, *apiError) {
	fs := filters(form)
	resp := describeFSRResponse{Xmlns: ec2Namespace, RequestID: requestID()}
	now := s.now()
	for _, key := range sortedKeys(s.st.FSR) {
		f := s.st.FSR[key]
		if f.Disabled {
			continue
		}
		var size int32
		if sn, ok := s.st.Snapshots[f.SnapshotID]; ok {
			size = sn.SizeGiB
		}
		state := s.fsrState(f, size, now)
		if !match(fs, map[string]string{"snapshot-id": f.SnapshotID, "availability-zone": f.AZ, "state": state, "owner-id": s.opts.AccountID}, nil) {
			continue
		}
		resp.Set.Items = append(resp.Set.Items, xFSRItem{SnapshotID: f.SnapshotID, AZ: f.AZ, State: state, OwnerID: s.opts.AccountID, EnablingTime: ts(f.EnabledAt)})
	}
	return resp, nil
}
