package tidbcluster

import "testing"

func TestServesLease(t *testing.T) {
	tests := []struct {
		in         string
		ok, judged bool
	}{
		{"v8.5.0", true, true},
		{"v8.0.0", true, true},
		{"v9.0.0-beta.1", true, true},
		{"v7.5.1", true, true},
		{"v7.5.6", true, true},
		{"v7.5.0", false, true},
		{"v7.6.0", false, true},
		{"v7.1.6", false, true},
		{"v6.5.8", true, true},
		{"v6.5.12", true, true},
		{"v6.5.7", false, true},
		{"v6.4.0", false, true},
		{"7.5.1", true, true},
		{"v7.5.1-20240101-abc1234", true, true},
		{"pingcap/tikv:v7.5.1", true, true},
		{"registry.example.com:5000/pingcap/tikv:v6.5.3", false, true},
		{"registry.example.com:5000/pingcap/tikv", false, false},
		{"pingcap/tikv:latest", false, false},
		{"pingcap/tikv:nightly", false, false},
		{"pingcap/tikv@sha256:0123", false, false},
		{"", false, false},
	}
	for _, tc := range tests {
		ok, judged := ServesLease(tc.in)
		if ok != tc.ok || judged != tc.judged {
			t.Errorf("ServesLease(%q) = %v, %v; want %v, %v", tc.in, ok, judged, tc.ok, tc.judged)
		}
	}
	if err := LeaseCheck("v7.1.6"); err == nil {
		t.Error("LeaseCheck(v7.1.6) passed")
	}
	if err := LeaseCheck("pingcap/tikv:latest"); err != nil {
		t.Errorf("LeaseCheck judged an unknown release: %v", err)
	}
}

func TestTiKVRelease(t *testing.T) {
	tc := map[string]any{"spec": map[string]any{"version": "v7.5.0", "tikv": map[string]any{"version": "v7.5.1"}},
		"status": map[string]any{"tikv": map[string]any{"image": "pingcap/tikv:v8.5.0"}}}
	if got := TiKVRelease(tc); got != "pingcap/tikv:v8.5.0" {
		t.Errorf("with a running image: %q", got)
	}
	delete(tc, "status")
	if got := TiKVRelease(tc); got != "v7.5.1" {
		t.Errorf("spec.tikv.version: %q", got)
	}
	delete(tc["spec"].(map[string]any), "tikv")
	if got := TiKVRelease(tc); got != "v7.5.0" {
		t.Errorf("spec.version: %q", got)
	}
	if got := TiKVRelease(map[string]any{}); got != "" {
		t.Errorf("nothing: %q", got)
	}
}
