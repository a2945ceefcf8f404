// Package mountinfo reads and writes the kernel's mount table format, /proc/PID/mountinfo
// (proc_pid_mountinfo(5)).
package mountinfo

import (
	"fmt"
	"os"
	"strings"
)

// Mount is one line of a mount table.
type Mount struct {
	Dev    string // MAJOR:MINOR of the file system's device
	Root   string // the directory of the file system mounted
	Point  string // where it is mounted
	FSType string
	Source string
}

// Self reads this process's mount table.
func Self() ([]Mount, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	return Parse(string(b))
}

// Parse parses the text of a mount table, whose lines read
//
//	36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue
//
// with optional fields (master:1) up to the "-", and spaces, tabs, newlines and
// backslashes in paths escaped as \ooo.
func Parse(text string) ([]Mount, error) {
	var ms []Mount
	for i, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		sep := -1
		for j := 6; j < len(f); j++ {
			if f[j] == "-" {
				sep = j
				break
			}
		}
		if sep < 0 || len(f) < sep+3 {
			return nil, fmt.Errorf("mountinfo line %d is malformed: %q", i+1, line)
		}
		ms = append(ms, Mount{Dev: f[2], Root: Unescape(f[3]), Point: Unescape(f[4]), FSType: f[sep+1], Source: Unescape(f[sep+2])})
	}
	return ms, nil
}

// Unescape decodes the kernel's \ooo octal escapes.
func Unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) && isOctal(s[i+1], '3') && isOctal(s[i+2], '7') && isOctal(s[i+3], '7') {
			b.WriteByte((s[i+1]-'0')<<6 | (s[i+2]-'0')<<3 | (s[i+3] - '0'))
			i += 3
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isOctal(c, maxDigit byte) bool {
	return c >= '0' && c <= maxDigit
}

// Escape escapes a path as the kernel does: space, tab, newline and backslash as three-digit
// octal.
func Escape(p string) string {
	var b strings.Builder
	for _, r := range p {
		switch r {
		case ' ', '\t', '\n', '\\':
			fmt.Fprintf(&b, "\\%03o", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
