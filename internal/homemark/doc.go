// Package homemark holds what homesnap keeps about a Jenkins home between
// runs: the check that a configured home is usable, and its mark (which
// snapshot the home matched, with a fingerprint of its selection), which
// snapshots write and restores read to decide.
package homemark
