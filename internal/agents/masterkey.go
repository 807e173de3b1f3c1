package agents

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/homesnap/homesnap/internal/homefs"
	"github.com/homesnap/homesnap/internal/jenkins"
)

// ReadMasterKeyFile reads a master.key kept out of the store (a mounted
// Secret, not the home). Its contents never appear in a message.
func ReadMasterKeyFile(p string) ([]byte, error) {
	key, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("master key file: %w (mount the Secret holding secrets/master.key there, or unset --master-key-file)", err)
	}
	if len(bytes.TrimSpace(key)) == 0 {
		return nil, fmt.Errorf("master key file %s is empty: it must hold the contents of the controller's secrets/master.key", p)
	}
	return key, nil
}

// InstallMasterKey puts key at secrets/master.key (mode 0600, owned like
// secrets/ when running as root). A different key already there is moved
// aside, never deleted. It writes through homefs: a symlink planted at
// secrets/, at master.key or at the temporary name is never written
// through.
func InstallMasterKey(home *homefs.Home, key []byte, log zerolog.Logger) error {
	dst := home.Join(jenkins.MasterKeyPath)
	if err := writeMasterKey(home, key, log); err != nil {
		return fmt.Errorf("install master key into %s: %w", dst, err)
	}
	log.Info().Str("path", dst).Msg("master key installed from the master key file")
	return nil
}

func writeMasterKey(home *homefs.Home, key []byte, log zerolog.Logger) error {
	if !home.Exists() {
		return fmt.Errorf("%w: no home opened", unix.ENOENT)
	}
	d := home.Dir
	if err := d.Mkdir(jenkins.SecretsDir, 0o700); err != nil {
		return err
	}
	var owner *homefs.Owner
	if os.Geteuid() == 0 {
		var st unix.Stat_t
		if err := d.Lstat(jenkins.SecretsDir, &st); err != nil {
			return err
		}
		owner = &homefs.Owner{UID: int(st.Uid), GID: int(st.Gid)}
	}
	old, err := d.ReadFile(jenkins.MasterKeyPath, jenkins.MaxKeyFile)
	switch {
	case err == nil && bytes.Equal(old, key):
		return nil
	case errors.Is(err, unix.ENOENT):
	default: // another key, or something that is not one: kept aside
		aside := jenkins.MasterKeyPath + ".homesnap-replaced-" + time.Now().UTC().Format("20060102T150405Z")
		if err := d.Rename(jenkins.MasterKeyPath, d, aside); err != nil {
			return err
		}
		log.Warn().Str("moved_to", home.Join(aside)).Msg("secrets/master.key differed from the master key file; the old one was moved aside")
	}
	return d.WriteFile(jenkins.MasterKeyPath, ".master.key.homesnap-tmp", key, 0o600, owner)
}
