package checklist

import (
	"errors"
	"reflect"
	"testing"
)

func TestLines(t *testing.T) {
	tests := []struct {
		name string
		l    List
		want []string
	}{
		{"where column", List{WhereWidth: 10, Checks: []Check{
			{Where: "control", What: "CRDs installed"},
			{Where: "dp1", What: "API server answers", Err: errors.New("refused")},
		}}, []string{"ok    control    CRDs installed", "FAIL  dp1        API server answers: refused"}},
		{"details aligned, none on a failure", List{WhatWidth: 9, Checks: []Check{
			{What: "region", Detail: "us-west-2"},
			{What: "identity", Detail: "ignored", Err: errors.New("no credentials")},
		}}, []string{"ok    region    us-west-2", "FAIL  identity: no credentials"}},
		{"bare", List{Checks: []Check{{What: "stores Up"}, {What: "regions tile", Err: errors.New("a gap")}}},
			[]string{"ok    stores Up", "FAIL  regions tile: a gap"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.l.Lines(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Lines = %q, want %q", got, tc.want)
			}
			if n := tc.l.Failed(); n != 1 {
				t.Errorf("Failed = %d, want 1", n)
			}
		})
	}
}
