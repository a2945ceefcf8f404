package tikvdouble

import (
	"encoding/binary"
	"fmt"
	"os"
)

// TearLogTail appends to the store log at path what a crash in the middle of an append leaves:
// a frame header announcing more bytes than follow, then the start of a record. A store that
// opens the log drops that tail (its checksum cannot match); tests use it to show recovery
// handles a torn log.
func TearLogTail(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("store log %s: %w", path, err)
	}
	if st.Size() == 0 {
		return fmt.Errorf("store log %s is empty: nothing to tear", path)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	var h [8]byte
	binary.LittleEndian.PutUint32(h[:], 64)
	binary.LittleEndian.PutUint32(h[4:], 0xdeadbeef)
	_, err = f.Write(append(h[:], `{"k":"entries","r":1`...))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
