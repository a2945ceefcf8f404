package apply

import (
	"bytes"
	"encoding/json"
)

// equalJSON compares two values by their JSON, the form the API server stores.
func equalJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
