// Package check reads snapshots without restoring them: Verify, the
// disaster-recovery drill that reads every object chosen snapshots need
// the way a restore would, and SnapshotFS, a read-only file system over
// some paths of a snapshot (the agent checks read keys through it).
package check
