// Package checklist prints checks one per line, as `fedbr preflight`, `fedbr br preflight` and
// `fedbr br verify` do: `ok    <what>` (with a detail) or `FAIL  <what>: <why>`, an optional
// first column saying where the check ran.
package checklist

import (
	"fmt"
	"io"
	"strings"
)

// Check is one check's outcome.
type Check struct {
	// Where the check ran (a data plane's context, "control"); empty: no such column.
	Where string
	// What it checks.
	What string
	// Detail is shown after What when the check passed.
	Detail string
	// Err says why it failed; nil: it passed.
	Err error
}

// Passed says the check passed.
func (c Check) Passed() bool { return c.Err == nil }

// List is checks printed with their columns aligned: Where padded to WhereWidth, What (when a
// Detail follows it) to WhatWidth.
type List struct {
	WhereWidth, WhatWidth int
	Checks                []Check
}

// Line is c as List l prints it.
func (l List) Line(c Check) string {
	var b strings.Builder
	if c.Passed() {
		b.WriteString("ok    ")
	} else {
		b.WriteString("FAIL  ")
	}
	if c.Where != "" || l.WhereWidth > 0 {
		fmt.Fprintf(&b, "%-*s ", l.WhereWidth, c.Where)
	}
	switch {
	case !c.Passed():
		fmt.Fprintf(&b, "%s: %v", c.What, c.Err)
	case c.Detail != "":
		fmt.Fprintf(&b, "%-*s %s", l.WhatWidth, c.What, c.Detail)
	default:
		b.WriteString(c.What)
	}
	return b.String()
}

// Lines are l's checks, one line each.
func (l List) Lines() []string {
	out := make([]string, 0, len(l.Checks))
	for _, c := range l.Checks {
		out = append(out, l.Line(c))
	}
	return out
}

// Failed counts the checks that failed.
func (l List) Failed() int {
	n := 0
	for _, c := range l.Checks {
		if !c.Passed() {
			n++
		}
	}
	return n
}

// Print writes l's lines to w.
func (l List) Print(w io.Writer) error {
	for _, line := range l.Lines() {
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	return nil
}
