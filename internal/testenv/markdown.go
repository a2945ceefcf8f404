package testenv

import (
	"os"
	"strings"
	"testing"
)

// CodeBlocks returns the fenced code blocks of the Markdown file at path whose info string is
// lang ("yaml", "sh", "json"), in order, without their fences. It fails the test when the file
// cannot be read or has no such block: a doc whose commands a test checks must keep them.
func CodeBlocks(t *testing.T, path, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	var cur strings.Builder
	inFence, keep := false, false
	for line := range strings.Lines(string(data)) {
		trimmed := strings.TrimSpace(line)
		switch {
		case !inFence && strings.HasPrefix(trimmed, "```"):
			inFence, keep = true, strings.TrimPrefix(trimmed, "```") == lang
			cur.Reset()
		case inFence && trimmed == "```":
			if keep {
				blocks = append(blocks, cur.String())
			}
			inFence = false
		case inFence && keep:
			cur.WriteString(line)
		}
	}
	if len(blocks) == 0 {
		t.Fatalf("%s has no %s code block", path, lang)
	}
	return blocks
}
