// Package e2e holds end-to-end tests that build the snapshot and restore
// binaries and drive them as a user would, through flags, environment
// variables and exit codes.
package e2e
