// Package uninstall tests the uninstall of docs/install.md as an operator
// types it: the page's commands, read from the page, run by kubectl's own
// delete command against a real control plane on which initlock was
// installed with every opt-in part. Each command must exit 0, and again
// when the whole sequence is run a second time; nothing initlock installed
// may be left, and no lock is touched.
//
// Limits: the lines for the alerts (config/monitoring, which needs the
// Prometheus operator's CRDs) and for Velero (velero plugin remove) are not
// run; the manager is installed but runs no Pod (the control plane has no
// kubelet).
package uninstall
