package cli

// DoctorReportKind is the kind of the JSON and YAML output of "kubectl
// initlock doctor", a DoctorReport of apiVersion ListAPIVersion, to which
// fields are only ever added, as to LockList.
const DoctorReportKind = "DoctorReport"

// The status of a check in DoctorCheck.
const (
	// CheckOK: the check passed.
	CheckOK = "ok"
	// CheckWarn: something may need a look, but nothing is broken (Velero
	// absent, a version that cannot be read); the exit code stays 0.
	CheckWarn = "warn"
	// CheckFail: the check failed; Remedy says what to do.
	CheckFail = "fail"
	// CheckUnknown: what the check needs could not be read (a permission
	// is missing, a request failed); Remedy names the permission. doctor
	// cannot vouch for it, so it counts as a failure.
	CheckUnknown = "unknown"
	// CheckSkipped: the check needs what another check found missing (no
	// manager Deployment, no Cluster API); that check fails instead.
	CheckSkipped = "skipped"
)

// ExitChecksFailed is the exit code of doctor when a check failed or could
// not be made (fail or unknown); warnings and skipped checks leave it 0.
const ExitChecksFailed = 2

// DoctorReport is the machine-readable output of doctor.
type DoctorReport struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Version is kubectl-initlock's, which the versions of the manager and
	// of the Velero plugin are compared with.
	Version string `json:"version"`
	// Healthy is true when no check failed or was unknown.
	Healthy bool `json:"healthy"`
	// Summary counts the checks by status.
	Summary DoctorSummary `json:"summary"`
	// Checks, in the order doctor makes them.
	Checks []DoctorCheck `json:"checks"`
}

// DoctorSummary counts the checks of each status.
type DoctorSummary struct {
	OK      int `json:"ok"`
	Warn    int `json:"warn"`
	Fail    int `json:"fail"`
	Unknown int `json:"unknown"`
	Skipped int `json:"skipped"`
}

// DoctorCheck is one check and its finding.
type DoctorCheck struct {
	// Name is the check's: lock-guard, garbage-collector, manager,
	// manager-version, manager-leader, manager-rbac, velero-plugin,
	// kubernetes-version, cluster-api-version or locks.
	Name string `json:"name"`
	// Status is ok, warn, fail, unknown or skipped.
	Status string `json:"status"`
	// Detail is what the check found, in one sentence.
	Detail string `json:"detail"`
	// Remedy is what to do, in one line; empty when the check passed.
	Remedy string `json:"remedy,omitempty"`
	// Items are what the check found one by one (the locks that need a
	// person), one line each.
	Items []string `json:"items,omitempty"`
}

// failed tells that c counts as a failure: fail or unknown.
func (c DoctorCheck) failed() bool { return c.Status == CheckFail || c.Status == CheckUnknown }

// newDoctorReport counts checks into a report of version.
func newDoctorReport(version string, checks []DoctorCheck) DoctorReport {
	r := DoctorReport{APIVersion: ListAPIVersion, Kind: DoctorReportKind, Version: version, Healthy: true, Checks: checks}
	for _, c := range checks {
		switch c.Status {
		case CheckOK:
			r.Summary.OK++
		case CheckWarn:
			r.Summary.Warn++
		case CheckFail:
			r.Summary.Fail++
		case CheckUnknown:
			r.Summary.Unknown++
		case CheckSkipped:
			r.Summary.Skipped++
		}
		if c.failed() {
			r.Healthy = false
		}
	}
	return r
}
