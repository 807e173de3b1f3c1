// Package restore makes a home equal to a snapshot: the decision table
// that says whether to restore at all (Decide, Restore), the plan and
// staging pass that fetch and check every file into a staging tree on the
// home's volume, and the commit that moves paths into place, rolls back
// on failure and, through its commit log (commitlog.go), is undone after
// a kill. It reads snapshots only through internal/fetch, and the home
// only beneath the homefs.Home the command opened.
package restore
