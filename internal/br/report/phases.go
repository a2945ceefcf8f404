package report

import dpv1alpha1 "github.com/fedbr/fedbr/api/dataplane/v1alpha1"

// The phases the steps report in their status (status.steps[].phase), each string defined here
// once: the steps that write them (internal/br/..., `fedbr warmup`) and the agent and `fedbr
// describe` that read them take these constants, so a renamed phase cannot leave a reader
// waiting for the old one. Which step goes through which phases is each step's own
// documentation (its package's Phase constants, aliases of these).
const (
	// PhaseFailed is the phase every step's status ends in when the step fails.
	PhaseFailed = dpv1alpha1.StepPhaseFailed
	// PhaseCompleted is the phase a step's status ends in when it succeeded (the pause, lift and
	// warm-up have their own: Stopped, Lifted, Completed).
	PhaseCompleted = "Completed"
	// PhaseStarting: the step began and has not reached its first state of its own.
	PhaseStarting = "Starting"
	// PhaseCleaningUp: a step that made something and failed deletes it.
	PhaseCleaningUp = "CleaningUp"

	// The pause and lift (internal/br/pause).
	PhaseGCPaused = "GCPaused"
	PhaseReady    = dpv1alpha1.PausePhaseReady
	PhaseStopping = dpv1alpha1.PausePhaseStopping
	PhaseStopped  = dpv1alpha1.PausePhaseStopped
	PhaseLifting  = "Lifting"
	PhaseLifted   = "Lifted"

	// The snapshot step (internal/br/snapshot).
	PhaseArmed    = "Armed"
	PhaseChecking = "Checking"
	PhaseStarted  = "Started"
	PhaseWaiting  = "Waiting"

	// restore-volumes (internal/br/restorevolumes).
	PhaseAwaitingCheck   = "AwaitingCheck"
	PhasePreparingPD     = "PreparingPD"
	PhaseCreatingVolumes = "CreatingVolumes"
	PhaseWaitingVolumes  = "WaitingVolumes"

	// restore-data (internal/br/restoredata).
	PhaseWaitingForStores  = "WaitingForStores"
	PhaseRecoveringRegions = "RecoveringRegions"
	PhaseFlashingBack      = "FlashingBack"

	// clean (internal/br/clean).
	PhaseSettling          = "Settling"
	PhaseDeletingSnapshots = "DeletingSnapshots"
	PhaseDeletingMetadata  = "DeletingMetadata"

	// The warm-up (`fedbr warmup --report-as`).
	PhaseReading = "Reading"
)
