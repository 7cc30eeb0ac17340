package clisuite

import "testing"

// cases are the commands' cases that run on every backend, by name.
var cases = []struct {
	name string
	run  func(t *testing.T, b *Backend)
}{
	{"ListGolden", listGolden},
	{"ListColourOnlyOnTerminal", listColourOnlyOnTerminal},
	{"ListRequestsDoNotGrowWithTheFleet", listRequestsDoNotGrowWithTheFleet},
	{"ListSkipsForeignSearchWhenEveryClusterHasItsLock", listSkipsForeignSearchWhenEveryClusterHasItsLock},
	{"ListAllNamespacesAndEmpty", listAllNamespacesAndEmpty},
	{"Selector", selector},
	{"OutputNameAndNoHeaders", outputNameAndNoHeaders},
	{"RelinksOutput", relinksOutput},
	{"DestructiveCommandsAskWhateverTheOutput", destructiveCommandsAskWhateverTheOutput},
	{"ReleaseDryRunAndForceAsks", releaseDryRunAndForceAsks},
	{"RepairOneCluster", repairOneCluster},
	{"ListShowsOnlyWhatTheManagerDoes", listShowsOnlyWhatTheManagerDoes},
	{"RepairWaitsForARestoredHolder", repairWaitsForARestoredHolder},
	{"RepairTakesLeftMarksOff", repairTakesLeftMarksOff},
	{"ReleaseReadsAgainAfterTheAnswer", releaseReadsAgainAfterTheAnswer},
	{"ReleaseLeavesALockMadeSince", releaseLeavesALockMadeSince},
	{"ReleaseStopsForAHolderBack", releaseStopsForAHolderBack},
	{"RepairConfirmsAfterTheAnswer", repairConfirmsAfterTheAnswer},
	{"RepairUsesTheManagersPolicy", repairUsesTheManagersPolicy},
	{"RepairWithoutManagerSaysSo", repairWithoutManagerSaysSo},
	{"MissingClusterIsNotFound", missingClusterIsNotFound},
	{"ReleaseRefusesWhileInitMayRunThenForce", releaseRefusesWhileInitMayRunThenForce},
	{"ReleaseAfterInitNeedsNoForce", releaseAfterInitNeedsNoForce},
	{"ReleaseLostLockEmptiesTheGrantRegister", releaseLostLockEmptiesTheGrantRegister},
	{"ReleaseOrphanAndStaleHolder", releaseOrphanAndStaleHolder},
	{"ReleaseCorrupt", releaseCorrupt},
	{"ReleaseRefusesForeignConfigMapEvenWithForce", releaseRefusesForeignConfigMapEvenWithForce},
	{"ReleaseArguments", releaseArguments},
	{"RepairFleet", repairFleet},
	{"RepairCollectsOrphanAfterGrace", repairCollectsOrphanAfterGrace},
	{"RepairNeverDeletesLockOfRunningInit", repairNeverDeletesLockOfRunningInit},
	{"RepairRetriesAfterConflict", repairRetriesAfterConflict},
	{"RepairConfirmationAndProgressOnTerminal", repairConfirmationAndProgressOnTerminal},
	{"RepairExitCodes", repairExitCodes},
	{"ReferenceSamples", referenceSamples},
}

// Run runs every case of the commands against b, each as a subtest of its
// name.
func Run(t *testing.T, b *Backend) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, b) })
	}
}
