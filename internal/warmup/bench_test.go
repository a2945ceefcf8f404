package warmup

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkWarmup reads a 256 MiB file with the engine (b.SetBytes gives the MB/s column)
// and, as the floor the engine must beat, with one reader reading it sequentially in chunks
// of the same size with the same O_DIRECT setting (O_DIRECT unless the file system refuses
// it; buffered reads would only measure the page cache). Both rates are reported in MB/s
// (10^6 bytes). Run it with
//
//	go test -run '^$' -bench Warmup -benchtime 3x ./internal/warmup/
func BenchmarkWarmup(b *testing.B) {
	const size = 256 << 20
	dir := b.TempDir()
	path := filepath.Join(dir, "data")
	writeBenchFile(b, path, size)
	direct := supportsDirect(dir, "data")
	if !direct {
		b.Logf("the file system of %s refuses O_DIRECT: both readers read the page cache", dir)
	}
	o := Options{FS: []string{dir}, Workers: DefaultWorkers, ChunkSize: DefaultChunkSize, Direct: direct}
	var seq time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sum, err := Run(context.Background(), o)
		if err != nil {
			b.Fatal(err)
		}
		if sum.Bytes != size || sum.Targets[0].Direct != direct {
			b.Fatalf("summary %+v, want %d bytes, direct %v", sum, size, direct)
		}
		b.StopTimer()
		start := time.Now()
		if n := readSequentially(b, path, direct); n != size {
			b.Fatalf("sequential read of %d bytes, want %d", n, size)
		}
		seq += time.Since(start)
		b.StartTimer()
	}
	engine := float64(size) * float64(b.N) / 1e6 / b.Elapsed().Seconds()
	floor := float64(size) * float64(b.N) / 1e6 / seq.Seconds()
	b.ReportMetric(engine, "engine-MB/s")
	b.ReportMetric(floor, "sequential-MB/s")
	b.ReportMetric(engine/floor, "x-sequential")
}

func writeBenchFile(b *testing.B, path string, size int) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i * 31)
	}
	for written := 0; written < size; written += len(block) {
		block[0]++ // not all blocks alike
		if _, err := f.Write(block); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// readSequentially is the plain reader: one read after the other, in DefaultChunkSize
// reads into one aligned buffer.
func readSequentially(b *testing.B, path string, direct bool) int64 {
	flags := os.O_RDONLY
	if direct {
		flags |= oDirect
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	buf := alignedBuffer(DefaultChunkSize)
	var n int64
	for {
		m, err := f.Read(buf)
		n += int64(m)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
	}
}
