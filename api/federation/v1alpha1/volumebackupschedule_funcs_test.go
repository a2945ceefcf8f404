package v1alpha1

import (
	"os"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/robfig/cron/v3"
)

func TestParseRetention(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "168h", want: 168 * time.Hour},
		{in: "7d", want: 7 * 24 * time.Hour},
		{in: "1d12h", want: 36 * time.Hour},
		{in: "1.5d", want: 36 * time.Hour},
		{in: "90m", want: 90 * time.Minute},
		{in: "1h30m15s", want: time.Hour + 30*time.Minute + 15*time.Second},
		{in: "0d", wantErr: true},
		{in: "0h0m", wantErr: true},
		{in: "7", wantErr: true},
		{in: "7days", wantErr: true},
		{in: "-1h", wantErr: true},
		{in: "", wantErr: true},
		{in: "1w", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseRetention(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseRetention(%q) error = %v, wantErr %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want {
				t.Fatalf("ParseRetention(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

// cronCases are schedules with the verdict of robfig/cron's standard parser, which is what the
// controller runs. Admission (CronPattern) must agree with it on all of them.
var cronCases = []struct {
	in string
	ok bool
}{
	{"0 */6 * * *", true},
	{"*/15 * * * *", true},
	{"0 2 * * 1-5", true},
	{"30 1 1,15 * *", true},
	{"0 0 * JAN,jul SUN", true},
	{"0 0 ? * mon-fri", true},
	{"5/10 * * * *", true},
	{"@daily", true},
	{"@every 1h30m", true},
	{"CRON_TZ=Asia/Shanghai 0 3 * * *", true},
	{"TZ=UTC 0 3 * * *", true},
	{"  0 3 * * *  ", true},
	{"60 * * * *", false},
	{"* 24 * * *", false},
	{"* * 0 * *", false},
	{"* * 32 * *", false},
	{"* * * 13 *", false},
	{"* * * * 7", false},
	{"*/0 * * * *", false},
	{"0 0 * *", false},
	{"0 0 * * * *", false},
	{"@fortnightly", false},
	{"every day", false},
	{"", false},
	{"0 0 * * MONDAY", false},
}

func TestCronPatternAgreesWithParser(t *testing.T) {
	for _, tc := range cronCases {
		admitted := cronRE.MatchString(tc.in)
		_, parseErr := cron.ParseStandard(strings.TrimSpace(tc.in))
		if admitted != tc.ok {
			t.Errorf("CronPattern admits %q = %v, want %v", tc.in, admitted, tc.ok)
		}
		if (parseErr == nil) != tc.ok {
			t.Errorf("robfig/cron accepts %q = %v, want %v (%v)", tc.in, parseErr == nil, tc.ok, parseErr)
		}
		if _, err := ParseSchedule(tc.in); (err == nil) != tc.ok {
			t.Errorf("ParseSchedule(%q) error = %v, want ok %v", tc.in, err, tc.ok)
		}
	}
}

// TestCronPatternNeverAdmitsWhatTheParserRejects checks random five-field expressions built from
// cron tokens: anything admission lets through must parse, except reversed ranges, which only the
// parser can see.
func TestCronPatternNeverAdmitsWhatTheParserRejects(t *testing.T) {
	tokens := []string{"*", "?", "0", "1", "5", "7", "12", "23", "24", "31", "59", "60", "*/5", "1-5", "5-1", "1,2", "jan", "sun", "mon-fri", "/3", "0/0", "10-20/2"}
	f := func(a, b, c, d, e uint8) bool {
		expr := strings.Join([]string{
			tokens[int(a)%len(tokens)], tokens[int(b)%len(tokens)], tokens[int(c)%len(tokens)],
			tokens[int(d)%len(tokens)], tokens[int(e)%len(tokens)],
		}, " ")
		if !cronRE.MatchString(expr) || strings.Contains(expr, "5-1") {
			return true
		}
		_, err := cron.ParseStandard(expr)
		if err != nil {
			t.Logf("admitted but unparsable: %q: %v", expr, err)
		}
		return err == nil
	}
	if err := quick.Check(f, &quick.Config{MaxCount: 20000}); err != nil {
		t.Fatal(err)
	}
}

// TestCRDCarriesThePatterns keeps the generated CRD and the Go patterns in step.
func TestCRDCarriesThePatterns(t *testing.T) {
	crd, err := os.ReadFile("../../../config/crd/bases/federation.pingcap.com_volumebackupschedules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// YAML may fold long rules; compare without line breaks and indentation.
	flat := strings.Join(strings.Fields(string(crd)), " ")
	for name, p := range map[string]string{"CronPattern": CronPattern, "RetentionPattern": RetentionPattern, "zeroRetentionPattern": zeroRetentionPattern} {
		if !strings.Contains(flat, strings.Join(strings.Fields(p), " ")) {
			t.Errorf("generated CRD does not carry %s; run make generate", name)
		}
	}
}
