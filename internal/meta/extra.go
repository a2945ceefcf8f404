package meta

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// Extra holds the JSON members of an object that this version does not know (written by
// upstream or a newer fedbr), so reading and writing a record again keeps them.
type Extra map[string]json.RawMessage

var knownKeys sync.Map // reflect.Type → map[string]bool

// keysOf returns the JSON member names of struct type t.
func keysOf(t reflect.Type) map[string]bool {
	if k, ok := knownKeys.Load(t); ok {
		return k.(map[string]bool)
	}
	keys := map[string]bool{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		keys[name] = true
	}
	knownKeys.Store(t, keys)
	return keys
}

// decodeKeeping decodes data into v (a pointer to an alias struct without methods) and
// returns the members v does not know.
func decodeKeeping(data []byte, v any) (Extra, error) {
	if err := json.Unmarshal(data, v); err != nil {
		return nil, err
	}
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil, nil
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, err
	}
	known := keysOf(reflect.TypeOf(v).Elem())
	var extra Extra
	for k, raw := range all {
		if !known[k] {
			if extra == nil {
				extra = Extra{}
			}
			extra[k] = raw
		}
	}
	return extra, nil
}

// encodeKeeping encodes v (an alias struct without methods) with the extra members added;
// known members win over extra ones of the same name.
func encodeKeeping(v any, extra Extra) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil || len(extra) == 0 {
		return b, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, err
	}
	for k, raw := range extra {
		if _, ok := all[k]; !ok {
			all[k] = raw
		}
	}
	return json.Marshal(all)
}

type recordJSON Record

// MarshalJSON keeps unknown members.
func (r Record) MarshalJSON() ([]byte, error) { return encodeKeeping(recordJSON(r), r.Extra) }

// UnmarshalJSON keeps unknown members.
func (r *Record) UnmarshalJSON(b []byte) (err error) {
	var a recordJSON
	a.Extra, err = decodeKeeping(b, &a)
	*r = Record(a)
	return err
}

type clusterInfoJSON ClusterInfo

// MarshalJSON keeps unknown members.
func (c ClusterInfo) MarshalJSON() ([]byte, error) {
	return encodeKeeping(clusterInfoJSON(c), c.Extra)
}

// UnmarshalJSON keeps unknown members.
func (c *ClusterInfo) UnmarshalJSON(b []byte) (err error) {
	var a clusterInfoJSON
	a.Extra, err = decodeKeeping(b, &a)
	*c = ClusterInfo(a)
	return err
}

type tikvJSON TiKV

// MarshalJSON keeps unknown members.
func (t TiKV) MarshalJSON() ([]byte, error) { return encodeKeeping(tikvJSON(t), t.Extra) }

// UnmarshalJSON keeps unknown members.
func (t *TiKV) UnmarshalJSON(b []byte) (err error) {
	var a tikvJSON
	a.Extra, err = decodeKeeping(b, &a)
	*t = TiKV(a)
	return err
}

type storeJSON TiKVStore

// MarshalJSON keeps unknown members.
func (s TiKVStore) MarshalJSON() ([]byte, error) { return encodeKeeping(storeJSON(s), s.Extra) }

// UnmarshalJSON keeps unknown members.
func (s *TiKVStore) UnmarshalJSON(b []byte) (err error) {
	var a storeJSON
	a.Extra, err = decodeKeeping(b, &a)
	*s = TiKVStore(a)
	return err
}

type volumeJSON Volume

// MarshalJSON keeps unknown members.
func (v Volume) MarshalJSON() ([]byte, error) { return encodeKeeping(volumeJSON(v), v.Extra) }

// UnmarshalJSON keeps unknown members.
func (v *Volume) UnmarshalJSON(b []byte) (err error) {
	var a volumeJSON
	a.Extra, err = decodeKeeping(b, &a)
	*v = Volume(a)
	return err
}

type componentJSON Component

// MarshalJSON keeps unknown members.
func (c Component) MarshalJSON() ([]byte, error) { return encodeKeeping(componentJSON(c), c.Extra) }

// UnmarshalJSON keeps unknown members.
func (c *Component) UnmarshalJSON(b []byte) (err error) {
	var a componentJSON
	a.Extra, err = decodeKeeping(b, &a)
	*c = Component(a)
	return err
}

type kubernetesJSON Kubernetes

// MarshalJSON keeps unknown members.
func (k Kubernetes) MarshalJSON() ([]byte, error) {
	return encodeKeeping(kubernetesJSON(k), k.Extra)
}

// UnmarshalJSON keeps unknown members.
func (k *Kubernetes) UnmarshalJSON(b []byte) (err error) {
	var a kubernetesJSON
	a.Extra, err = decodeKeeping(b, &a)
	*k = Kubernetes(a)
	return err
}

type extensionJSON Extension

// MarshalJSON keeps unknown members.
func (e Extension) MarshalJSON() ([]byte, error) { return encodeKeeping(extensionJSON(e), e.Extra) }

// UnmarshalJSON keeps unknown members.
func (e *Extension) UnmarshalJSON(b []byte) (err error) {
	var a extensionJSON
	a.Extra, err = decodeKeeping(b, &a)
	*e = Extension(a)
	return err
}
