package steplog

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestTeeKeepsHeadAndTail: everything reaches the writer; what is kept is the whole log while it
// fits, then its head and its tail with the size of the gap between them.
func TestTeeKeepsHeadAndTail(t *testing.T) {
	var out bytes.Buffer
	tee := New(&out)
	_, _ = tee.Write([]byte("short\n"))
	if got := string(tee.Bytes()); got != "short\n" {
		t.Fatalf("a short log kept as %q", got)
	}
	var all bytes.Buffer
	all.WriteString("short\n")
	for i := 0; all.Len() < HeadBytes+TailBytes+300<<10; i++ {
		line := strings.Repeat("x", i%97) + "\n"
		all.WriteString(line)
		_, _ = tee.Write([]byte(line))
	}
	if !bytes.Equal(out.Bytes(), all.Bytes()) {
		t.Fatal("the writer did not get every byte")
	}
	kept := tee.Bytes()
	dropped := all.Len() - HeadBytes - TailBytes
	gap := []byte("\n[fedbr: " + strconv.Itoa(dropped) + " bytes of the log left out here]\n")
	want := append(append(append([]byte{}, all.Bytes()[:HeadBytes]...), gap...), all.Bytes()[all.Len()-TailBytes:]...)
	if !bytes.Equal(kept, want) {
		t.Errorf("kept %d bytes, want head, gap line and tail (%d)", len(kept), len(want))
	}
}
