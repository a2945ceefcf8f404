package restoredata

import (
	"context"
	"strings"
	"testing"
)

// TestRunReportsFailure: a data phase that cannot start still reports Starting, then Failed
// with the reason, so the agent's watch never waits on a silent Job.
func TestRunReportsFailure(t *testing.T) {
	var got []Status
	_, err := Run(context.Background(), Deps{Report: func(s Status) { got = append(got, s) }}, Config{})
	if err == nil {
		t.Fatal("Run without a resolved ts succeeded")
	}
	if len(got) != 2 || got[0].Phase != PhaseStarting || got[1].Phase != PhaseFailed || !strings.Contains(got[1].Error, "resolved ts is 0") {
		t.Fatalf("statuses = %+v, want Starting then Failed with the reason", got)
	}
}
