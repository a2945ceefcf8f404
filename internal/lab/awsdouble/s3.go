package awsdouble

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// serveS3 is a path-style S3 over the directory <data>/s3: buckets are directories, objects
// are files. It covers what fedbr's metadata store uses: create/head bucket, put, get, head,
// delete and ListObjectsV2 (prefix, no delimiter).
func (s *Server) serveS3(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(path, "/")
	if bucket == "" {
		writeS3Error(w, r, 400, "InvalidRequest", "no bucket")
		return
	}
	if s.inject("S3") == faultThrottle {
		writeS3Error(w, r, 503, "SlowDown", "Please reduce your request rate.")
		return
	}
	bdir := filepath.Join(s.dir, "s3", bucket)
	if key == "" {
		s.serveBucket(w, r, bucket, bdir)
		return
	}
	if strings.Contains("/"+key+"/", "/../") || strings.Contains(key, "\x00") {
		writeS3Error(w, r, 400, "InvalidArgument", "invalid key")
		return
	}
	if _, err := os.Stat(bdir); err != nil {
		writeS3Error(w, r, 404, "NoSuchBucket", "The specified bucket does not exist")
		return
	}
	file := filepath.Join(bdir, "objects", filepath.FromSlash(key))
	switch r.Method {
	case http.MethodPut:
		body, err := readS3Body(r)
		if err != nil {
			writeS3Error(w, r, 400, "IncompleteBody", err.Error())
			return
		}
		if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
			writeS3Error(w, r, 500, "InternalError", err.Error())
			return
		}
		if err := writeFileAtomic(file, body); err != nil {
			writeS3Error(w, r, 500, "InternalError", err.Error())
			return
		}
		w.Header().Set("ETag", etag(body))
		w.WriteHeader(200)
	case http.MethodGet, http.MethodHead:
		body, err := os.ReadFile(file)
		if err != nil {
			writeS3Error(w, r, 404, "NoSuchKey", "The specified key does not exist.")
			return
		}
		info, _ := os.Stat(file)
		w.Header().Set("ETag", etag(body))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Last-Modified", info.ModTime().UTC().Format(http.TimeFormat))
		w.WriteHeader(200)
		if r.Method == http.MethodGet {
			_, _ = w.Write(body)
		}
	case http.MethodDelete:
		_ = os.Remove(file)
		w.WriteHeader(204)
	default:
		writeS3Error(w, r, 405, "MethodNotAllowed", "method not allowed")
	}
}

func etag(b []byte) string {
	h := md5.Sum(b)
	return `"` + hex.EncodeToString(h[:]) + `"`
}

type listBucketResult struct {
	XMLName     xml.Name `xml:"http://s3.amazonaws.com/doc/2006-03-01/ ListBucketResult"`
	Name        string   `xml:"Name"`
	Prefix      string   `xml:"Prefix"`
	KeyCount    int      `xml:"KeyCount"`
	MaxKeys     int      `xml:"MaxKeys"`
	IsTruncated bool     `xml:"IsTruncated"`
	Contents    []struct {
		Key          string `xml:"Key"`
		LastModified string `xml:"LastModified"`
		ETag         string `xml:"ETag"`
		Size         int64  `xml:"Size"`
		StorageClass string `xml:"StorageClass"`
	} `xml:"Contents"`
	NextContinuationToken string `xml:"NextContinuationToken,omitempty"`
}

func (s *Server) serveBucket(w http.ResponseWriter, r *http.Request, bucket, bdir string) {
	switch r.Method {
	case http.MethodPut:
		if err := os.MkdirAll(filepath.Join(bdir, "objects"), 0o755); err != nil {
			writeS3Error(w, r, 500, "InternalError", err.Error())
			return
		}
		w.Header().Set("Location", "/"+bucket)
		w.WriteHeader(200)
	case http.MethodHead:
		if _, err := os.Stat(bdir); err != nil {
			writeS3Error(w, r, 404, "NoSuchBucket", "The specified bucket does not exist")
			return
		}
		w.WriteHeader(200)
	case http.MethodGet:
		if _, err := os.Stat(bdir); err != nil {
			writeS3Error(w, r, 404, "NoSuchBucket", "The specified bucket does not exist")
			return
		}
		q := r.URL.Query()
		prefix := q.Get("prefix")
		maxKeys := 1000
		if m, err := strconv.Atoi(q.Get("max-keys")); err == nil && m > 0 && m < 1000 {
			maxKeys = m
		}
		after := q.Get("continuation-token")
		if after == "" {
			after = q.Get("start-after")
		}
		root := filepath.Join(bdir, "objects")
		var keys []string
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".tmp-") {
				return nil
			}
			rel, _ := filepath.Rel(root, p)
			k := filepath.ToSlash(rel)
			if strings.HasPrefix(k, prefix) && k > after {
				keys = append(keys, k)
			}
			return nil
		})
		sort.Strings(keys)
		res := listBucketResult{Name: bucket, Prefix: prefix, MaxKeys: maxKeys}
		if len(keys) > maxKeys {
			keys = keys[:maxKeys]
			res.IsTruncated = true
			res.NextContinuationToken = keys[len(keys)-1]
		}
		for _, k := range keys {
			info, err := os.Stat(filepath.Join(root, filepath.FromSlash(k)))
			if err != nil {
				continue
			}
			res.Contents = append(res.Contents, struct {
				Key          string `xml:"Key"`
				LastModified string `xml:"LastModified"`
				ETag         string `xml:"ETag"`
				Size         int64  `xml:"Size"`
				StorageClass string `xml:"StorageClass"`
			}{Key: k, LastModified: ts(info.ModTime()), ETag: `""`, Size: info.Size(), StorageClass: "STANDARD"})
		}
		res.KeyCount = len(res.Contents)
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(xml.Header))
		_ = xml.NewEncoder(w).Encode(res)
	default:
		writeS3Error(w, r, 405, "MethodNotAllowed", "method not allowed")
	}
}

// readS3Body reads a PutObject body, decoding aws-chunked framing (used by the SDK for
// streaming checksums) when present.
func readS3Body(r *http.Request) ([]byte, error) {
	chunked := strings.Contains(r.Header.Get("Content-Encoding"), "aws-chunked") ||
		strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-")
	if !chunked {
		return io.ReadAll(r.Body)
	}
	br := bufio.NewReader(r.Body)
	var out bytes.Buffer
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, fmt.Errorf("read chunk header: %w", err)
		}
		sizeHex, _, _ := strings.Cut(strings.TrimSpace(line), ";")
		n, err := strconv.ParseInt(sizeHex, 16, 64)
		if err != nil {
			return nil, fmt.Errorf("bad chunk size %q: %w", sizeHex, err)
		}
		if n == 0 {
			return out.Bytes(), nil // trailers (checksums) follow; not verified
		}
		if _, err := io.CopyN(&out, br, n); err != nil {
			return nil, fmt.Errorf("read chunk: %w", err)
		}
		if _, err := br.ReadString('\n'); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("read chunk end: %w", err)
		}
	}
}

func writeS3Error(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	_, _ = fmt.Fprintf(w, "%s<Error><Code>%s</Code><Message>%s</Message><RequestId>%s</RequestId></Error>", xml.Header, code, msg, requestID())
}
