package jenkins

// OperatorBackup is what a backup of the Jenkins kubernetes-operator holds
// (its backup container runs `tar --zstd -C $JENKINS_HOME -c jobs` into
// BACKUP_DIR/N.tar.zstd): jobs/ with the builds and state of every job,
// but not a top-level job's own config.xml (the operator recreates jobs
// from seed jobs or configuration as code; config.xml of folders' and
// branches' children stay) and no workspace at any depth. It holds nothing
// outside jobs/: no nodes/, no secrets/, no instance identity, so neither
// agents nor credentials come back from it.
var OperatorBackup = Selection{
	Include: []string{"jobs"},
	// Jenkins' half-written temp files are in the archive when it was
	// taken mid-save; the import skips them as every snapshot does.
	Exclude: []string{"jobs/*/config.xml", "jobs/*/**/workspace*", inFlight},
}

// OperatorBackupRoot is the one top-level directory of an operator backup.
const OperatorBackupRoot = "jobs"
