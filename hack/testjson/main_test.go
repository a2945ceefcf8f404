package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A go test -json stream: a passing test whose logs stay out of the output, a failing subtest
// whose every line is shown, a slice line, and the packages' result lines.
const stream = `{"Action":"start","Package":"p/a"}
{"Action":"run","Package":"p/a","Test":"TestOK"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"    a_test.go:3: chatter of a passing test\n"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"fedbr-slice: test/x: seed 3 takes 1 of 4 parts: b\n"}
{"Action":"output","Package":"p/a","Test":"TestOK","Output":"--- PASS: TestOK (0.10s)\n"}
{"Action":"pass","Package":"p/a","Test":"TestOK","Elapsed":0.1}
{"Action":"run","Package":"p/a","Test":"TestBad"}
{"Action":"output","Package":"p/a","Test":"TestBad","Output":"=== RUN   TestBad\n"}
{"Action":"run","Package":"p/a","Test":"TestBad/sub"}
{"Action":"output","Package":"p/a","Test":"TestBad/sub","Output":"    a_test.go:9: want 1, got 2\n"}
{"Action":"output","Package":"p/a","Test":"TestBad/sub","Output":"    --- FAIL: TestBad/sub (0.00s)\n"}
{"Action":"fail","Package":"p/a","Test":"TestBad/sub","Elapsed":0}
{"Action":"output","Package":"p/a","Test":"TestBad","Output":"--- FAIL: TestBad (0.00s)\n"}
{"Action":"fail","Package":"p/a","Test":"TestBad","Elapsed":0}
{"Action":"run","Package":"p/a","Test":"TestSkipped"}
{"Action":"skip","Package":"p/a","Test":"TestSkipped","Elapsed":0}
{"Action":"output","Package":"p/a","Output":"FAIL\n"}
{"Action":"output","Package":"p/a","Output":"FAIL\tp/a\t1.500s\n"}
{"Action":"fail","Package":"p/a","Elapsed":1.5}
{"Action":"start","Package":"p/b"}
{"Action":"run","Package":"p/b","Test":"TestB"}
{"Action":"pass","Package":"p/b","Test":"TestB","Elapsed":3}
{"Action":"output","Package":"p/b","Output":"PASS\n"}
{"Action":"output","Package":"p/b","Output":"ok  \tp/b\t12.000s\n"}
{"Action":"pass","Package":"p/b","Elapsed":12}
{"Action":"start","Package":"p/c"}
{"Action":"output","Package":"p/c","Output":"?   \tp/c\t[no test files]\n"}
{"Action":"skip","Package":"p/c","Elapsed":0}
`

func TestFilter(t *testing.T) {
	var out, raw bytes.Buffer
	failed, err := filter(strings.NewReader(stream), &out, &raw)
	if err != nil {
		t.Fatal(err)
	}
	if !failed {
		t.Error("a stream with a failed test: filter says nothing failed")
	}
	if raw.String() != stream {
		t.Errorf("the raw copy differs from the stream:\n%s", raw.String())
	}
	want := "fedbr-slice: test/x: seed 3 takes 1 of 4 parts: b\n" +
		"    a_test.go:9: want 1, got 2\n    --- FAIL: TestBad/sub (0.00s)\n" +
		"=== RUN   TestBad\n--- FAIL: TestBad (0.00s)\n" +
		"FAIL\nFAIL\tp/a\t1.500s\n" +
		"ok  \tp/b\t12.000s\n" +
		"?   \tp/c\t[no test files]\n"
	if out.String() != want {
		t.Errorf("filter printed:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestFilterPassing(t *testing.T) {
	const pass = `{"Action":"run","Package":"p/b","Test":"TestB"}
{"Action":"pass","Package":"p/b","Test":"TestB","Elapsed":3}
{"Action":"pass","Package":"p/b","Elapsed":12}
`
	var out, raw bytes.Buffer
	if failed, err := filter(strings.NewReader(pass), &out, &raw); err != nil || failed {
		t.Errorf("a passing stream: failed %v, error %v", failed, err)
	}
}

// TestFilterCutShort: a stream that ends inside a test (a killed binary) counts as failed and
// shows what the test printed.
func TestFilterCutShort(t *testing.T) {
	const cut = `{"Action":"run","Package":"p/b","Test":"TestB"}
{"Action":"output","Package":"p/b","Test":"TestB","Output":"last words\n"}
`
	var out, raw bytes.Buffer
	failed, err := filter(strings.NewReader(cut), &out, &raw)
	if err != nil || !failed || !strings.Contains(out.String(), "last words") {
		t.Errorf("a stream cut short: failed %v, error %v, printed %q", failed, err, out.String())
	}
}

func TestTable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "race.json")
	if err := os.WriteFile(file, []byte(stream), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := table(&out, []string{file}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("table has %d lines, want a header, p/b, p/a and the total (no p/c, which has no tests):\n%s", len(lines), out.String())
	}
	for i, want := range [][]string{
		{"seconds", "result", "package"},
		{"12.0", "pass", "1", "race", "p/b"},
		{"1.5", "fail", "3", "race", "p/a"},
		{"13.5", "2 packages"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i, lines[i], w)
			}
		}
	}
}
