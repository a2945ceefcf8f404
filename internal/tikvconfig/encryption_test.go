package tikvconfig

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// toml is config as tidb-operator writes spec.tikv.config: a JSON string of TOML.
func tomlConfig(config string) json.RawMessage { return json.RawMessage(strconv.Quote(config)) }

// TestParseEncryption: both forms of spec.tikv.config read the same; absent keys are unset;
// the method is read in lower case as TiKV does; other settings are ignored; a value of the
// wrong type, a config of neither form and one over MaxBytes are refused.
func TestParseEncryption(t *testing.T) {
	kms := Encryption{Method: "aes256-ctr", MasterKey: MasterKey{Type: MasterKeyKMS, KeyID: "key-1"}}
	for _, tt := range []struct {
		name, config string
		want         Encryption
		wantErr      bool
	}{
		{name: "absent", config: ``},
		{name: "null", config: `null`},
		{name: "empty TOML", config: `""`},
		{name: "empty map", config: `{}`},
		{name: "TOML without security", config: string(tomlConfig("[storage]\nreserve-space = \"0MB\"\n"))},
		{name: "TOML kms", config: string(tomlConfig("[storage]\nreserve-space = \"0MB\"\n[security.encryption]\ndata-encryption-method = \"AES256-CTR\"\n" +
			"[security.encryption.master-key]\ntype = \"kms\"\nkey-id = \"key-1\"\nregion = \"us-west-2\"\n")), want: kms},
		{name: "TOML dotted keys", config: string(tomlConfig("security.encryption.data-encryption-method = 'aes256-ctr'\nsecurity.encryption.master-key = { type = 'kms', key-id = 'key-1' }\n")), want: kms},
		{name: "map kms", config: `{"security":{"encryption":{"data-encryption-method":"aes256-ctr","master-key":{"type":"kms","key-id":"key-1","region":"us-west-2"}}},"storage":{"reserve-space":"0MB"}}`, want: kms},
		{name: "map file with previous kms", config: `{"security":{"encryption":{"data-encryption-method":"sm4-ctr","master-key":{"type":"file","path":"/k"},"previous-master-key":{"type":"kms","key-id":"old"}}}}`,
			want: Encryption{Method: "sm4-ctr", MasterKey: MasterKey{Type: MasterKeyFile, Path: "/k"}, PreviousMasterKey: MasterKey{Type: MasterKeyKMS, KeyID: "old"}}},
		{name: "plaintext", config: string(tomlConfig("[security.encryption]\ndata-encryption-method = \"plaintext\"\n")), want: Encryption{Method: MethodPlaintext}},
		{name: "not TOML", config: string(tomlConfig("[security.encryption\n")), wantErr: true},
		{name: "a number", config: `42`, wantErr: true},
		{name: "method not a string", config: `{"security":{"encryption":{"data-encryption-method":1}}}`, wantErr: true},
		{name: "encryption not a table", config: `{"security":{"encryption":"aes128-ctr"}}`, wantErr: true},
		{name: "key id not a string", config: `{"security":{"encryption":{"master-key":{"type":"kms","key-id":["a"]}}}}`, wantErr: true},
		{name: "too large", config: string(tomlConfig("# " + strings.Repeat("x", MaxBytes) + "\n")), wantErr: true},
		{name: "inline tables nested too deep", config: string(tomlConfig("a = " + strings.Repeat("{b=", MaxTOMLSeparators+1))), wantErr: true},
		{name: "dotted key too deep", config: string(tomlConfig("a" + strings.Repeat(".a", MaxTOMLSeparators+1) + " = 1\n")), wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseEncryption(json.RawMessage(tt.config))
			if tt.wantErr {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("err %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestMapReadsBack: Map is the map form ParseEncryption reads back as the same encryption,
// and nil for none.
func TestMapReadsBack(t *testing.T) {
	for _, e := range []Encryption{
		{},
		{Method: MethodPlaintext},
		{Method: "aes128-ctr", MasterKey: MasterKey{Type: MasterKeyKMS, KeyID: "k"}},
		{Method: "aes128-ctr", MasterKey: MasterKey{Type: MasterKeyFile, Path: "/p"}, PreviousMasterKey: MasterKey{Type: MasterKeyKMS, KeyID: "old"}},
	} {
		b, err := json.Marshal(e.Map())
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseEncryption(b)
		if err != nil || got != e {
			t.Errorf("%+v: map %s reads back as %+v, %v", e, b, got, err)
		}
		if (e == Encryption{}) != (e.Map() == nil) {
			t.Errorf("%+v: map %v", e, e.Map())
		}
	}
}

// TestKeysHolding: the dotted keys whose value is a path, from a TOML string (tables, dotted
// keys) or a map, sorted; none from an absent config; a config that is neither is invalid.
func TestKeysHolding(t *testing.T) {
	for _, tt := range []struct {
		name, config string
		want         []string
		err          bool
	}{
		{"TOML tables", strconv.Quote("[raft-engine]\ndir = \"/var/lib/raft\"\n[rocksdb]\nwal-dir = \"/var/lib/wal\"\n"), []string{"raft-engine.dir"}, false},
		{"TOML dotted keys, two hold it", strconv.Quote("rocksdb.wal-dir = \"/var/lib/raft\"\nraft-engine.dir = \"/var/lib/raft\"\n"), []string{"raft-engine.dir", "rocksdb.wal-dir"}, false},
		{"map", `{"raft-engine":{"dir":"/var/lib/raft","enable":true}}`, []string{"raft-engine.dir"}, false},
		{"no key holds it", strconv.Quote("[raft-engine]\ndir = \"/data/raft\"\n"), nil, false},
		{"absent", ``, nil, false},
		{"null", `null`, nil, false},
		{"neither TOML nor a map", `[1]`, nil, true},
		{"bad TOML", strconv.Quote("[raft-engine"), nil, true},
	} {
		got, err := KeysHolding(json.RawMessage(tt.config), "/var/lib/raft")
		if (err != nil) != tt.err || !slices.Equal(got, tt.want) {
			t.Errorf("%s: KeysHolding = %v, %v; want %v (error %v)", tt.name, got, err, tt.want, tt.err)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: error %v is not ErrInvalid", tt.name, err)
		}
	}
}
