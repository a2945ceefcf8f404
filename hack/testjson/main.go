// Command testjson turns `go test -json` into what `make test` shows, and tables the run.
//
//	go test -json ./... | testjson filter --out _output/test/race.json
//	testjson table _output/test/*.json
//
// filter copies every event to --out and prints, as plain `go test` would: each package's
// result line, build errors, and the whole output of every test that failed; a passing test's
// logs are kept in the file only. Lines a test prints starting with "fedbr-slice:" (which part
// of a long suite this run takes, internal/lab/labtest.Slice) are printed as they come. It exits
// 1 when a test or package failed.
//
// table prints every package's time, result and test counts from the files, slowest first,
// with the total, for docs/development.md.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, and go test's build events).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// slicePrefix starts the lines that say which part of a long suite a run takes.
const slicePrefix = "fedbr-slice:"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "filter":
		fs := flag.NewFlagSet("filter", flag.ExitOnError)
		out := fs.String("out", "", "file to copy every event to (required)")
		_ = fs.Parse(os.Args[2:])
		if *out == "" {
			usage()
		}
		var failed bool
		failed, err = filterFile(os.Stdin, os.Stdout, *out)
		if err == nil && failed {
			os.Exit(1)
		}
	case "table":
		err = table(os.Stdout, os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "testjson:", err)
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: testjson filter --out FILE < go-test-json | testjson table FILE...")
	os.Exit(2)
}

func filterFile(in io.Reader, w io.Writer, out string) (bool, error) {
	if err := os.MkdirAll(filepath.Dir(out), 0o750); err != nil {
		return false, err
	}
	f, err := os.Create(out) //nolint:gosec // G304: the path make test names
	if err != nil {
		return false, err
	}
	failed, ferr := filter(in, w, f)
	return failed, errors.Join(ferr, f.Close())
}

// filter reads events from in, copies each line to raw and prints to w what a reader of the
// run needs. It reports whether anything failed.
func filter(in io.Reader, w, raw io.Writer) (bool, error) {
	// output buffers each running test's lines, by package and test, until it ends.
	output := map[[2]string][]string{}
	failed := false
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if _, err := raw.Write(append(line, '\n')); err != nil {
			return failed, err
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Action == "" {
			// go test prints some failures (a package that does not build) as plain text.
			_, _ = fmt.Fprintf(w, "%s\n", line)
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			_, _ = io.WriteString(w, e.Output)
		case "build-fail":
			failed = true
		case "output":
			if strings.HasPrefix(strings.TrimSpace(e.Output), slicePrefix) {
				_, _ = io.WriteString(w, strings.TrimSpace(e.Output)+"\n")
			}
			if e.Test == "" {
				// The package's own lines: its result, a panic outside any test, a timeout.
				if o := strings.TrimSpace(e.Output); o != "PASS" && !strings.HasPrefix(o, slicePrefix) {
					_, _ = io.WriteString(w, e.Output)
				}
				continue
			}
			output[key] = append(output[key], e.Output)
		case "fail":
			failed = true
			if e.Test != "" {
				_, _ = io.WriteString(w, strings.Join(output[key], ""))
			}
			delete(output, key)
		case "pass", "skip":
			delete(output, key)
		}
	}
	// A stream that ends inside a test (the binary was killed): show what it printed.
	for key, lines := range output {
		failed = true
		_, _ = fmt.Fprintf(w, "--- %s %s did not end:\n%s", key[0], key[1], strings.Join(lines, ""))
	}
	return failed, sc.Err()
}

// pkgRow is one package's line of the table.
type pkgRow struct {
	group, pkg, result   string
	elapsed              float64
	pass, fail, skip, nt int
}

func table(w io.Writer, files []string) error {
	if len(files) == 0 {
		return errors.New("table: no files")
	}
	var rows []*pkgRow
	for _, file := range files {
		r, err := readRows(file)
		if err != nil {
			return err
		}
		rows = append(rows, r...)
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].elapsed > rows[j].elapsed })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	_, _ = fmt.Fprintln(tw, "seconds\tresult\ttests\tpassed\tfailed\tskipped\tgroup\t package\t")
	var total float64
	n := 0
	for _, r := range rows {
		if r.result == "skip" && r.nt == 0 {
			continue // no test files
		}
		n++
		total += r.elapsed
		_, _ = fmt.Fprintf(tw, "%.1f\t%s\t%d\t%d\t%d\t%d\t%s\t %s\t\n", r.elapsed, r.result, r.nt, r.pass, r.fail, r.skip, r.group, r.pkg)
	}
	_, _ = fmt.Fprintf(tw, "%.1f\t\t\t\t\t\t\t %d packages (the sum; packages of one group may run two at a time)\t\n", total, n)
	return tw.Flush()
}

// readRows reads one file's package rows; the group is the file's name without .json.
func readRows(file string) ([]*pkgRow, error) {
	f, err := os.Open(file) //nolint:gosec // G304: the files make test wrote
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	group := strings.TrimSuffix(filepath.Base(file), ".json")
	byPkg := map[string]*pkgRow{}
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Package == "" {
			continue
		}
		r := byPkg[e.Package]
		if r == nil {
			r = &pkgRow{group: group, pkg: e.Package, result: "?"}
			byPkg[e.Package] = r
			order = append(order, e.Package)
		}
		switch {
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			r.result, r.elapsed = e.Action, e.Elapsed
		case e.Test != "" && !strings.Contains(e.Test, "/") && e.Action == "pass":
			r.pass++
			r.nt++
		case e.Test != "" && !strings.Contains(e.Test, "/") && e.Action == "fail":
			r.fail++
			r.nt++
		case e.Test != "" && !strings.Contains(e.Test, "/") && e.Action == "skip":
			r.skip++
			r.nt++
		}
	}
	rows := make([]*pkgRow, 0, len(order))
	for _, p := range order {
		rows = append(rows, byPkg[p])
	}
	return rows, sc.Err()
}
