package mountinfo

import "testing"

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		`/plain`:          `/plain`,
		`/a\040b`:         `/a b`,
		`/tab\011nl\012`:  "/tab\tnl\n",
		`/back\134slash`:  `/back\slash`,
		`/not\08octal`:    `/not\08octal`,
		`/short\04`:       `/short\04`,
		`/too\400big`:     `/too\400big`,
		`\040\040`:        `  `,
		`/trailing\`:      `/trailing\`,
		`/mixed\040\x`:    `/mixed \x`,
		`/unicode-é\040é`: `/unicode-é é`,
	} {
		if got := Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEscapeRoundTrip(t *testing.T) {
	for _, p := range []string{"/plain", "/a b", "/tab\tnl\n", `/back\slash`, "/unicode-é é"} {
		esc := Escape(p)
		for _, c := range []string{" ", "\t", "\n"} {
			if containsAny(esc, c) {
				t.Errorf("Escape(%q) = %q still holds %q", p, esc, c)
			}
		}
		if got := Unescape(esc); got != p {
			t.Errorf("Unescape(Escape(%q)) = %q", p, got)
		}
	}
}

func containsAny(s, c string) bool {
	for i := 0; i+len(c) <= len(s); i++ {
		if s[i:i+len(c)] == c {
			return true
		}
	}
	return false
}
