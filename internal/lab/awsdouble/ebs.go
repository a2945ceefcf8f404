package awsdouble

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serveEBS answers the EBS direct List APIs:
// GET /snapshots/{id}/blocks and GET /snapshots/{second}/changedblocks?firstSnapshotId=.
func (s *Server) serveEBS(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/snapshots/"), "/")
	if r.Method != http.MethodGet || len(parts) != 2 || (parts[1] != "blocks" && parts[1] != "changedblocks") {
		writeEBSError(w, errf(400, "ValidationException", "unsupported EBS direct request %s %s", r.Method, r.URL.Path), "")
		return
	}
	action := "ListSnapshotBlocks"
	if parts[1] == "changedblocks" {
		action = "ListChangedBlocks"
	}
	s.ebsList(w, r, parts[0], action)
	s.count(action, w.Header().Get("X-Amzn-ErrorType"))
}

func (s *Server) ebsList(w http.ResponseWriter, r *http.Request, snapshotID, action string) {
	switch s.inject(action) {
	case faultThrottle:
		writeEBSError(w, errf(400, "RequestThrottledException", "Rate exceeded"), "ACCOUNT_THROTTLED")
		return
	case faultUnavailable:
		writeEBSError(w, errf(500, "InternalServerException", "Service unavailable"), "")
		return
	}
	q := r.URL.Query()
	firstID := q.Get("firstSnapshotId")
	s.mu.Lock()
	if !s.allow("ebs/"+action, s.opts.Limits.EBSDirect) {
		s.mu.Unlock()
		writeEBSError(w, errf(400, "RequestThrottledException", "Rate exceeded"), "ACCOUNT_THROTTLED")
		return
	}
	second, first, aerr, reason := s.listedSnapshots(snapshotID, firstID, action)
	if aerr != nil {
		s.mu.Unlock()
		writeEBSError(w, aerr, reason)
		return
	}
	secondSet := s.blockSetFor(second)
	var firstSet *blockSet
	if first != nil {
		firstSet = s.blockSetFor(first)
	}
	s.mu.Unlock()
	maxResults := 10000
	if m := q.Get("maxResults"); m != "" {
		n, err := strconv.Atoi(m)
		if err != nil || n < 100 || n > 10000 {
			writeEBSError(w, errf(400, "ValidationException", "maxResults must be between 100 and 10000"), "INVALID_PARAMETER_VALUE")
			return
		}
		maxResults = n
	}
	start := int32(0)
	if v := q.Get("startingBlockIndex"); v != "" {
		n, _ := strconv.Atoi(v)
		start = int32(n)
	}
	if tok := q.Get("pageToken"); tok != "" {
		b, err := base64.RawURLEncoding.DecodeString(tok)
		n, err2 := strconv.Atoi(string(b))
		if err != nil || err2 != nil {
			writeEBSError(w, errf(400, "ValidationException", "invalid pageToken"), "INVALID_PAGE_TOKEN")
			return
		}
		start = int32(n)
	}
	<-secondSet.done // ready: the snapshot is completed
	blocks := secondSet.blocks
	if secondSet.err != nil {
		writeEBSError(w, errf(500, "InternalServerException", "%v", secondSet.err), "")
		return
	}
	out := map[string]any{
		"BlockSize":  BlockSize,
		"VolumeSize": second.SizeGiB,
		"ExpiryTime": float64(time.Now().Add(7 * 24 * time.Hour).Unix()),
	}
	next := int32(-1)
	if action == "ListSnapshotBlocks" {
		list := []map[string]any{}
		for _, b := range blocks {
			if b.Index < start {
				continue
			}
			if len(list) == maxResults {
				next = b.Index
				break
			}
			list = append(list, map[string]any{"BlockIndex": b.Index, "BlockToken": blockToken(second.ID, b)})
		}
		out["Blocks"] = list
	} else {
		var firstBlocks []block
		if firstSet != nil {
			<-firstSet.done
			if firstSet.err != nil {
				writeEBSError(w, errf(500, "InternalServerException", "%v", firstSet.err), "")
				return
			}
			firstBlocks = firstSet.blocks
		}
		list := []map[string]any{}
		for _, c := range changed(firstBlocks, blocks) {
			if c.index < start {
				continue
			}
			if len(list) == maxResults {
				next = c.index
				break
			}
			item := map[string]any{"BlockIndex": c.index}
			if c.first != nil {
				item["FirstBlockToken"] = blockToken(firstID, *c.first)
			}
			if c.second != nil {
				item["SecondBlockToken"] = blockToken(second.ID, *c.second)
			}
			list = append(list, item)
		}
		out["ChangedBlocks"] = list
	}
	if next >= 0 {
		out["NextToken"] = base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(int(next))))
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// readableSnapshot returns a completed snapshot; s.mu is held.
func (s *Server) readableSnapshot(id string) (*Snapshot, *apiError) {
	sn, ok := s.snapshotByID(id)
	if !ok {
		return nil, errf(404, "ResourceNotFoundException", "The snapshot %s does not exist.", id)
	}
	if st, _ := s.state(sn); st != "completed" {
		return nil, errf(400, "ValidationException", "The snapshot %s is not completed.", id)
	}
	return sn, nil
}

// listedSnapshots are the snapshots an EBS direct listing reads: the second (or only) one and,
// for ListChangedBlocks with a first snapshot, the first, which must be of its lineage; or the
// error and its reason. s.mu is held.
func (s *Server) listedSnapshots(secondID, firstID, action string) (second, first *Snapshot, aerr *apiError, reason string) {
	second, aerr = s.readableSnapshot(secondID)
	if aerr == nil && action == "ListChangedBlocks" && firstID != "" {
		first, aerr = s.readableSnapshot(firstID)
	}
	if aerr != nil {
		return nil, nil, aerr, "SNAPSHOT_NOT_FOUND"
	}
	if first != nil && !s.sameLineage(first, second) {
		return nil, nil, errf(400, "ValidationException", "The snapshots %s and %s are not of the same volume lineage.", first.ID, second.ID), "UNRELATED_SNAPSHOTS"
	}
	return second, first, nil, ""
}

// sameLineage says whether first is of second's volume/snapshot lineage, the only pairs
// ListChangedBlocks compares ("Returns information about the blocks that are different between
// two Amazon Elastic Block Store snapshots of the same volume/snapshot lineage", EBS direct APIs
// reference, ListChangedBlocks; otherwise a ValidationException with reason
// UNRELATED_SNAPSHOTS, one of the reasons the API lists): first was taken of second's volume,
// or of a volume second's volume descends from (restored from a snapshot of it, at any depth).
// A lineage is followed through the double's volume records, so one through a deleted volume
// is not found; s.mu is held.
func (s *Server) sameLineage(first, second *Snapshot) bool {
	vol := second.VolumeID
	for range len(s.st.Snapshots) + 1 {
		if vol == first.VolumeID {
			return true
		}
		v, ok := s.st.Volumes[vol]
		if !ok || v.SnapshotID == "" {
			return false
		}
		parent, ok := s.st.Snapshots[v.SnapshotID]
		if !ok {
			return false
		}
		vol = parent.VolumeID
	}
	return false
}

type change struct {
	index         int32
	first, second *block
}

// changed merges two sorted block lists into the blocks whose content differs.
func changed(first, second []block) []change {
	var out []change
	i, j := 0, 0
	for i < len(first) || j < len(second) {
		switch {
		case j == len(second) || (i < len(first) && first[i].Index < second[j].Index):
			out = append(out, change{index: first[i].Index, first: &first[i]})
			i++
		case i == len(first) || second[j].Index < first[i].Index:
			out = append(out, change{index: second[j].Index, second: &second[j]})
			j++
		default:
			if first[i].Hash != second[j].Hash {
				out = append(out, change{index: first[i].Index, first: &first[i], second: &second[j]})
			}
			i++
			j++
		}
	}
	return out
}

func writeEBSError(w http.ResponseWriter, e *apiError, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", e.Code)
	w.WriteHeader(e.Status)
	body := map[string]any{"__type": e.Code, "Message": e.Message}
	if reason != "" {
		body["Reason"] = reason
	}
	_ = json.NewEncoder(w).Encode(body)
}
