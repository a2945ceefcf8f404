// Package tikvconfig reads TiKV's configuration as tidb-operator holds it in a TidbCluster's
// spec.tikv.config: a TOML string or a map of the same keys (tidb-operator's
// TiKVConfigWraper, a GenericConfig, accepts both and writes the string). Of it fedbr reads
// the encryption at rest (TiKV's [security.encryption]), which a restore checks, and which
// key holds a storage volume's mount path, which a backup records as the volume's type.
package tikvconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// MaxBytes bounds the configuration parsed: a backup's comes from storage and is untrusted.
// A TiKV configuration is a few KiB.
const MaxBytes = 128 << 10

// MaxTOMLSeparators bounds the '.', '[' and '{' of a TOML configuration, in keys and values
// alike (dotted keys, table headers, arrays, inline tables, and the dots of addresses and
// paths: a TiKV configuration has at most a few hundred): the TOML parser takes time
// quadratic in the depth of a dotted key or of nested inline tables, and the bound keeps a
// forged configuration under a second.
const MaxTOMLSeparators = 2048

// MethodPlaintext is the data-encryption-method of an unencrypted TiKV (TiKV's default).
const MethodPlaintext = "plaintext"

// Master key backends (security.encryption.master-key.type).
const (
	MasterKeyPlaintext = "plaintext"
	MasterKeyFile      = "file"
	MasterKeyKMS       = "kms"
)

// ErrInvalid marks a configuration that is not TiKV's: neither a TOML string nor a map, too
// large, or an encryption key of another type.
var ErrInvalid = errors.New("invalid TiKV config")

// Encryption is TiKV's encryption at rest, security.encryption.
type Encryption struct {
	// Method is data-encryption-method in lower case (TiKV reads it so): "plaintext",
	// "aes128-ctr", "aes192-ctr", "aes256-ctr" or "sm4-ctr"; "" when unset (plaintext).
	Method string
	// MasterKey encrypts the data keys; PreviousMasterKey is the one TiKV falls back to while
	// the master key is rotated.
	MasterKey, PreviousMasterKey MasterKey
}

// MasterKey is a master-key (or previous-master-key) table.
type MasterKey struct {
	// Type is "plaintext", "file" or "kms"; "" when unset (plaintext).
	Type string
	// KeyID is a kms key's key-id.
	KeyID string
	// Path is a file key's path (on the TiKV pod: another cluster's may differ).
	Path string
}

// Encrypted says whether TiKV encrypts its data: a method other than plaintext.
func (e Encryption) Encrypted() bool { return e.Method != "" && e.Method != MethodPlaintext }

// String names the method and master key, for messages.
func (e Encryption) String() string {
	if !e.Encrypted() {
		return "no encryption (data-encryption-method " + orUnset(e.Method) + ")"
	}
	return "data-encryption-method " + orUnset(e.Method) + ", master-key " + e.MasterKey.String()
}

func (k MasterKey) String() string {
	switch k.Type {
	case MasterKeyKMS:
		return "kms key-id " + orUnset(k.KeyID)
	case MasterKeyFile:
		return "file " + orUnset(k.Path)
	}
	return orUnset(k.Type)
}

func orUnset(s string) string {
	if s == "" {
		return "unset"
	}
	return fmt.Sprintf("%q", s)
}

// Map is e as spec.tikv.config's map form, with only the keys e sets (nil when none): what
// ParseEncryption reads back as e.
func (e Encryption) Map() map[string]any {
	enc := map[string]any{}
	if e.Method != "" {
		enc["data-encryption-method"] = e.Method
	}
	for key, k := range map[string]MasterKey{"master-key": e.MasterKey, "previous-master-key": e.PreviousMasterKey} {
		if m := k.table(); m != nil {
			enc[key] = m
		}
	}
	if len(enc) == 0 {
		return nil
	}
	return map[string]any{"security": map[string]any{"encryption": enc}}
}

func (k MasterKey) table() map[string]any {
	m := map[string]any{}
	for key, v := range map[string]string{"type": k.Type, "key-id": k.KeyID, "path": k.Path} {
		if v != "" {
			m[key] = v
		}
	}
	if len(m) == 0 {
		return nil
	}
	return m
}

// ParseEncryption reads security.encryption from config, spec.tikv.config as JSON: a TOML
// string, a map, or absent (null or empty: no encryption). At most MaxBytes are parsed.
func ParseEncryption(config json.RawMessage) (Encryption, error) {
	tree, err := parse(config)
	if err != nil || tree == nil {
		return Encryption{}, err
	}
	enc, err := table(tree, "security", "encryption")
	if err != nil || enc == nil {
		return Encryption{}, err
	}
	var e Encryption
	if e.Method, err = str(enc, "security.encryption", "data-encryption-method"); err != nil {
		return Encryption{}, err
	}
	e.Method = strings.ToLower(e.Method)
	if e.MasterKey, err = masterKey(enc, "master-key"); err != nil {
		return Encryption{}, err
	}
	if e.PreviousMasterKey, err = masterKey(enc, "previous-master-key"); err != nil {
		return Encryption{}, err
	}
	return e, nil
}

// parse reads config, spec.tikv.config as JSON (a TOML string, a map, or absent: nil), into
// its tree of tables. At most MaxBytes are parsed.
func parse(config json.RawMessage) (map[string]any, error) {
	raw := bytes.TrimSpace(config)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if len(raw) > MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrInvalid, len(raw), MaxBytes)
	}
	var tree map[string]any
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		if n := strings.Count(s, ".") + strings.Count(s, "[") + strings.Count(s, "{"); n > MaxTOMLSeparators {
			return nil, fmt.Errorf("%w: TOML with %d of '.', '[' and '{', at most %d", ErrInvalid, n, MaxTOMLSeparators)
		}
		if _, err := toml.Decode(s, &tree); err != nil {
			return nil, fmt.Errorf("%w: TOML: %w", ErrInvalid, err)
		}
	case '{':
		if err := json.Unmarshal(raw, &tree); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
	default:
		return nil, fmt.Errorf("%w: neither a TOML string nor a map", ErrInvalid)
	}
	return tree, nil
}

// KeysHolding lists, sorted, the dotted keys of config (spec.tikv.config as JSON: a TOML
// string, a map, or absent) whose value is the string value: e.g. raft-engine.dir for
// "/var/lib/raft" when `[raft-engine] dir = "/var/lib/raft"`. A backup types a TiKV storage
// volume by the key that points TiKV at its mount path.
func KeysHolding(config json.RawMessage, value string) ([]string, error) {
	tree, err := parse(config)
	if err != nil {
		return nil, err
	}
	var keys []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			switch v := v.(type) {
			case map[string]any:
				walk(prefix+k+".", v)
			case string:
				if v == value {
					keys = append(keys, prefix+k)
				}
			}
		}
	}
	walk("", tree)
	slices.Sort(keys)
	return keys, nil
}

// masterKey reads the master key table key of security.encryption.
func masterKey(enc map[string]any, key string) (MasterKey, error) {
	t, err := table(enc, key)
	if err != nil || t == nil {
		return MasterKey{}, err
	}
	path := "security.encryption." + key
	var k MasterKey
	if k.Type, err = str(t, path, "type"); err != nil {
		return MasterKey{}, err
	}
	if k.KeyID, err = str(t, path, "key-id"); err != nil {
		return MasterKey{}, err
	}
	if k.Path, err = str(t, path, "path"); err != nil {
		return MasterKey{}, err
	}
	return k, nil
}

// table follows keys down nested tables; nil when one is absent.
func table(m map[string]any, keys ...string) (map[string]any, error) {
	for i, k := range keys {
		v, ok := m[k]
		if !ok || v == nil {
			return nil, nil
		}
		t, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%w: %s is a %T, not a table", ErrInvalid, strings.Join(keys[:i+1], "."), v)
		}
		m = t
	}
	return m, nil
}

// str is the string m[key] of the table at path; "" when absent.
func str(m map[string]any, path, key string) (string, error) {
	v, ok := m[key]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("%w: %s.%s is a %T, not a string", ErrInvalid, path, key, v)
	}
	return s, nil
}
