// Package fetch reads a snapshot back from the store for those who apply
// or check it: its manifest as a checked stream of the entries a selection
// lets through (Plan, Filter), and their bytes through bounded ranged reads
// of the archives (Fetcher, RunBuilder), each file checked against its
// hash. Restore and check share it; neither reaches into the other.
package fetch
