// Package snapshot writes snapshots into a store: the home's walk merged
// with the parent's manifest (Snapshot), the head's own tree with some
// archives' files copied into a new one (Rewrite, for consolidation), and
// an operator backup's tar stream (Import). All three commit the same
// way (commit.go): archive, manifest and record stored first, then the
// head moved by compare-and-swap, and what was stored removed again when
// the head cannot move. It also writes the home's mark (internal/homemark)
// and owns the guards against committing a shrunken or empty home. A
// long-lived sidecar's snapshots can read only what the change journal
// saw change (ChangeJournal, changes.go). The home is the homefs.Home the
// command opened, read beneath its descriptor only.
package snapshot
