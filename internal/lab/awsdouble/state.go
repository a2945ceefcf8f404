package awsdouble

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/fedbr/fedbr/internal/lab/volumelock"
)

const stateFile = "state.json"

// BlockSize is the EBS direct block size.
const BlockSize = 512 * 1024

// state is everything the double persists.
type state struct {
	VirtualNow time.Time            `json:"virtualNow"`
	Instances  map[string]*Instance `json:"instances"`
	Volumes    map[string]*Volume   `json:"volumes"`
	Snapshots  map[string]*Snapshot `json:"snapshots"`
	// FSR is keyed by snapshot id + "/" + AZ.
	FSR map[string]*FSR `json:"fsr"`
	// ClientTokens maps CreateVolume client tokens to the volume they created (idempotency).
	ClientTokens map[string]string `json:"clientTokens,omitempty"`
	// SnapshotErrorsUsed counts consumed Faults.SnapshotErrors.
	SnapshotErrorsUsed int `json:"snapshotErrorsUsed"`
}

// Instance is an EC2 instance of the double.
type Instance struct {
	ID         string            `json:"id"`
	AZ         string            `json:"az"`
	RootDevice string            `json:"rootDevice"`
	Tags       map[string]string `json:"tags,omitempty"`
	Created    time.Time         `json:"created"`
}

// Volume is an EBS volume of the double; its data is the directory Dir.
type Volume struct {
	ID         string            `json:"id"`
	AZ         string            `json:"az"`
	SizeGiB    int32             `json:"sizeGiB"`
	Type       string            `json:"type"`
	IOPS       int32             `json:"iops,omitempty"`
	Throughput int32             `json:"throughput,omitempty"`
	Encrypted  bool              `json:"encrypted"`
	KMSKeyID   string            `json:"kmsKeyId,omitempty"`
	SnapshotID string            `json:"snapshotId,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Created    time.Time         `json:"created"`
	// AvailableAt is when "creating" turns "available".
	AvailableAt time.Time `json:"availableAt"`
	// VisibleAt is when the API first shows the volume (DescribeDelay); zero is at once.
	VisibleAt time.Time `json:"visibleAt,omitzero"`
	// LastSnapshot is when the volume's latest snapshot started (the per-volume rate).
	LastSnapshot time.Time `json:"lastSnapshot,omitzero"`
	FastRestored bool      `json:"fastRestored,omitempty"`
	InstanceID   string    `json:"instanceId,omitempty"`
	Device       string    `json:"device,omitempty"`
	AttachTime   time.Time `json:"attachTime,omitempty"`
	// Dir is the volume's directory (Options.Volumes dir), Image its block device image (ext4).
	Dir   string `json:"dir,omitempty"`
	Image string `json:"image,omitempty"`
}

// Snapshot is an EBS snapshot of the double: the captured files with their lengths.
type Snapshot struct {
	ID          string            `json:"id"`
	VolumeID    string            `json:"volumeId"`
	SizeGiB     int32             `json:"sizeGiB"`
	Encrypted   bool              `json:"encrypted"`
	KMSKeyID    string            `json:"kmsKeyId,omitempty"`
	Description string            `json:"description,omitempty"`
	Tags        map[string]string `json:"tags,omitempty"`
	// OwnerID is the account owning the snapshot when it is not the double's own (a snapshot
	// another account shares with it: visible, restorable, but neither deletable nor taggable
	// here, and its owner's tags are not shown); empty is the double's account.
	OwnerID    string    `json:"ownerId,omitempty"`
	Started    time.Time `json:"started"`
	CompleteAt time.Time `json:"completeAt"`
	// Failed snapshots stay pending until FailAt, then are in the error state.
	Failed bool      `json:"failed,omitempty"`
	FailAt time.Time `json:"failAt,omitzero"`
	// VisibleAt is when the API first shows the snapshot (DescribeDelay); zero is at once.
	VisibleAt time.Time    `json:"visibleAt,omitzero"`
	Files     []FileRecord `json:"files"`
	// Image is set when the snapshot is an image of the volume's device (snapshots/ID.img)
	// rather than its files.
	Image bool `json:"image,omitempty"`
	// Bytes is the captured data size.
	Bytes int64 `json:"bytes"`
}

// FileRecord is one captured file: its path in the volume and its length at the instant.
type FileRecord struct {
	Path   string `json:"path"`
	Length int64  `json:"length"`
}

// FSR is the fast snapshot restore state of a snapshot in one AZ.
type FSR struct {
	SnapshotID string    `json:"snapshotId"`
	AZ         string    `json:"az"`
	EnabledAt  time.Time `json:"enabledAt"`
	Disabled   bool      `json:"disabled,omitempty"`
	// Credits is the balance at CreditsAt.
	Credits   float64   `json:"credits"`
	CreditsAt time.Time `json:"creditsAt"`
}

func loadState(path string) (*state, error) {
	st := &state{}
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	default:
		if err := json.Unmarshal(b, st); err != nil {
			return nil, fmt.Errorf("decode state %s: %w", path, err)
		}
	}
	if st.Instances == nil {
		st.Instances = map[string]*Instance{}
	}
	if st.Volumes == nil {
		st.Volumes = map[string]*Volume{}
	}
	if st.Snapshots == nil {
		st.Snapshots = map[string]*Snapshot{}
	}
	if st.FSR == nil {
		st.FSR = map[string]*FSR{}
	}
	if st.ClientTokens == nil {
		st.ClientTokens = map[string]string{}
	}
	return st, nil
}

// snapshotState derives a snapshot's state and progress at now.
func snapshotState(sn *Snapshot, now time.Time) (string, float64) {
	if sn.Failed {
		if !now.Before(sn.FailAt) {
			return "error", 0
		}
		total := sn.CompleteAt.Sub(sn.Started)
		if total <= 0 || !now.Before(sn.CompleteAt) {
			return "pending", 99
		}
		return "pending", min(99, math.Floor(float64(now.Sub(sn.Started))/float64(total)*100))
	}
	if !now.Before(sn.CompleteAt) {
		return "completed", 100
	}
	total := sn.CompleteAt.Sub(sn.Started)
	if total <= 0 {
		return "completed", 100
	}
	return "pending", math.Floor(float64(now.Sub(sn.Started)) / float64(total) * 100)
}

func volumeState(v *Volume, now time.Time) string {
	switch {
	case now.Before(v.AvailableAt):
		return "creating"
	case v.InstanceID != "":
		return "in-use"
	default:
		return "available"
	}
}

// fsrState derives the FSR state at now.
func (s *Server) fsrState(f *FSR, sizeGiB int32, now time.Time) string {
	if f.Disabled {
		return "disabled"
	}
	enabling := f.EnabledAt.Add(s.opts.FSREnablingDuration)
	if now.Before(enabling) {
		return "enabling"
	}
	opt := time.Duration(float64(s.opts.FSROptimizingPerTiB) * float64(sizeGiB) / 1024)
	if now.Before(enabling.Add(opt)) {
		return "optimizing"
	}
	return "enabled"
}

// fsrBucket is the credit bucket of a snapshot of sizeGiB: capacity and refill per hour.
func fsrBucket(sizeGiB int32) (float64, float64) {
	if sizeGiB <= 0 {
		sizeGiB = 1
	}
	fill := math.Min(10, 1024/float64(sizeGiB))
	return math.Max(1, fill), fill
}

// credits brings an FSR's balance up to now and returns it.
func (s *Server) credits(f *FSR, sizeGiB int32, now time.Time) float64 {
	if f.Disabled {
		return 0
	}
	capacity, perHour := fsrBucket(sizeGiB)
	if now.After(f.CreditsAt) {
		f.Credits = math.Min(capacity, f.Credits+now.Sub(f.CreditsAt).Hours()*perHour)
		f.CreditsAt = now
	}
	return f.Credits
}

// capture takes one point-in-time image of the given volumes: exclusive locks on all of
// them (sorted), every file's length recorded and the file hard-linked into the snapshot's
// directory, then the locks are released. s.mu is held by the caller.
func (s *Server) capture(vols []*Volume, snapIDs []string) (map[string][]FileRecord, error) {
	dirs := make([]string, len(vols))
	for i, v := range vols {
		dirs[i] = v.Dir
	}
	lock, err := volumelock.Exclusive(dirs...)
	if err != nil {
		return nil, fmt.Errorf("freeze volumes: %w", err)
	}
	defer func() { _ = lock.Unlock() }()
	out := map[string][]FileRecord{}
	for i, v := range vols {
		snapDir := filepath.Join(s.dir, "snapshots", snapIDs[i])
		var recs []FileRecord
		err := filepath.WalkDir(v.Dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(v.Dir, path)
			if rel == "." {
				return nil
			}
			if volumelock.Private(rel) {
				if d.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
			if d.IsDir() || !d.Type().IsRegular() {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			dst := filepath.Join(snapDir, rel)
			if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
				return err
			}
			if err := os.Link(path, dst); err != nil {
				return err
			}
			recs = append(recs, FileRecord{Path: filepath.ToSlash(rel), Length: info.Size()})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("capture volume %s: %w", v.ID, err)
		}
		slices.SortFunc(recs, func(a, b FileRecord) int {
			switch {
			case a.Path < b.Path:
				return -1
			case a.Path > b.Path:
				return 1
			}
			return 0
		})
		out[v.ID] = recs
	}
	return out, nil
}

// restoreFiles fills dir with the snapshot's files, each cut to its recorded length.
func (s *Server) restoreFiles(sn *Snapshot, dir string) error {
	for _, f := range sn.Files {
		src := filepath.Join(s.dir, "snapshots", sn.ID, filepath.FromSlash(f.Path))
		dst := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := copyPrefix(src, dst, f.Length); err != nil {
			return fmt.Errorf("restore %s from %s: %w", f.Path, sn.ID, err)
		}
	}
	return nil
}

func copyPrefix(src, dst string, n int64) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(out, in, n); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// block is one non-zero 512 KiB block of a snapshot's image.
type block struct {
	Index int32
	Hash  [sha256.Size]byte
}

// Image is a snapshot's volume image: its files concatenated in path order, each cut to its
// recorded length.
func (s *Server) image(sn *Snapshot) (io.Reader, func(), error) {
	var readers []io.Reader
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			_ = f.Close()
		}
	}
	for _, rec := range sn.Files {
		f, err := os.Open(filepath.Join(s.dir, "snapshots", sn.ID, filepath.FromSlash(rec.Path)))
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		files = append(files, f)
		readers = append(readers, io.LimitReader(f, rec.Length))
	}
	return io.MultiReader(readers...), closeAll, nil
}

// blockSet is a snapshot's block map, computed in the background from the snapshot's
// immutable files, without the server lock, so hashing a large volume never stalls the API.
type blockSet struct {
	done   chan struct{}
	blocks []block
	err    error
	// doneAt is the double's time when it was computed (set before done is closed).
	doneAt time.Time
}

// blockSetFor returns the snapshot's block set, starting its computation; s.mu is held.
func (s *Server) blockSetFor(sn *Snapshot) *blockSet {
	if bs, ok := s.blocks[sn.ID]; ok {
		return bs
	}
	bs := &blockSet{done: make(chan struct{})}
	s.blocks[sn.ID] = bs
	snap := *sn // Files never change after capture
	go func() {
		s.hashing <- struct{}{} // bound the CPU spent hashing at once
		bs.blocks, bs.err = s.computeBlocks(&snap)
		<-s.hashing
		bs.doneAt = s.Now()
		close(bs.done)
	}()
	return bs
}

// state is a snapshot's state and progress now; s.mu is held. A snapshot reports completed
// only once its block map is ready, as AWS finishes processing before it reports completed.
func (s *Server) state(sn *Snapshot) (string, float64) {
	st, progress := snapshotState(sn, s.now())
	if st == "completed" {
		select {
		case <-s.blockSetFor(sn).done:
		default:
			return "pending", 99
		}
	}
	return st, progress
}

// computeBlocks reads a snapshot's image and returns its non-zero blocks.
func (s *Server) computeBlocks(sn *Snapshot) ([]block, error) {
	if sn.Image {
		out, err := imageBlocks(s.snapshotImage(sn.ID))
		if err != nil {
			return nil, fmt.Errorf("read snapshot %s: %w", sn.ID, err)
		}
		return out, nil
	}
	r, closeAll, err := s.image(sn)
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", sn.ID, err)
	}
	defer closeAll()
	var out []block
	buf := make([]byte, BlockSize)
	zero := make([]byte, BlockSize)
	for idx := int32(0); ; idx++ {
		n, err := io.ReadFull(r, buf)
		if n > 0 {
			clear(buf[n:])
			if !bytes.Equal(buf, zero) {
				out = append(out, block{Index: idx, Hash: sha256.Sum256(buf)})
			}
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read snapshot %s: %w", sn.ID, err)
		}
	}
	return out, nil
}

func blockToken(snapID string, b block) string {
	h := sha256.Sum256(append([]byte(snapID), b.Hash[:]...))
	return base64.StdEncoding.EncodeToString(h[:24])
}
