package labdns

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTable: operators' files make one table; a name of the node's own domain resolves in its
// short forms too, another domain's only fully qualified; removing a file removes its names.
func TestTable(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, "dp1.local", "tidb.basic", []Entry{{IP: "127.0.1.10", Name: ServiceName("basic-pd", "tidb", "dp1.local")}}); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "dp2.local", "tidb.other", []Entry{{IP: "127.0.2.10", Name: ServiceName("other-pd", "tidb", "dp2.local")}}); err != nil {
		t.Fatal(err)
	}
	table, err := Read(dir)
	if err != nil || len(table) != 2 {
		t.Fatalf("table %v, %v", table, err)
	}
	for host, want := range map[string]string{
		"basic-pd.tidb.svc.dp1.local":  "127.0.1.10",
		"basic-pd.tidb.svc.dp1.local.": "127.0.1.10",
		"basic-pd.tidb.svc":            "127.0.1.10",
		"basic-pd.tidb":                "127.0.1.10",
		"other-pd.tidb.svc.dp2.local":  "127.0.2.10",
		"other-pd.tidb":                "",
		"basic-pd":                     "",
		"127.0.5.5":                    "127.0.5.5",
	} {
		if got, _ := Lookup(table, "dp1.local", host); got != want {
			t.Errorf("Lookup(%s) = %q, want %q", host, got, want)
		}
	}
	hosts := string(Hosts(Pod{Hostname: "step-0", IP: "127.0.0.1", Aliases: []Alias{{IP: "10.0.0.1", Hostnames: []string{"a", "b"}}}}, "dp1.local", table))
	for _, line := range []string{"127.0.0.1\tlocalhost", "127.0.0.1\tstep-0", "10.0.0.1\ta\tb",
		"127.0.1.10\tbasic-pd.tidb.svc.dp1.local basic-pd.tidb.svc basic-pd.tidb", "127.0.2.10\tother-pd.tidb.svc.dp2.local\n"} {
		if !strings.Contains(hosts, line) {
			t.Errorf("hosts file lacks %q:\n%s", line, hosts)
		}
	}
	if err := Write(dir, "dp2.local", "tidb.other", nil); err != nil {
		t.Fatal(err)
	}
	table, _ = Read(dir)
	if diff := cmp.Diff([]Entry{{IP: "127.0.1.10", Name: "basic-pd.tidb.svc.dp1.local"}}, table); diff != "" {
		t.Errorf("after removal (-want +got):\n%s", diff)
	}
	if err := Write(dir, "dp1.local", "bad", []Entry{{IP: "not-an-ip", Name: "x"}}); err == nil || !strings.Contains(err.Error(), "want an IP address") {
		t.Errorf("a bad entry: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "dp1.local", "bad.hosts")); !os.IsNotExist(err) {
		t.Errorf("a refused table was written: %v", err)
	}
}
