package cli

import (
	"github.com/rs/zerolog"

	"github.com/homesnap/homesnap/internal/store"
)

// encryptionDocs is where a user learns to authenticate a store.
const encryptionDocs = "https://github.com/homesnap/homesnap/blob/main/docs/encryption.md#authenticated-by-default"

// warnUnauthenticated is logged once at the start of every command that
// reads or writes a store without a key: nothing it reads is checked, so a
// bucket writer decides what a restore puts in the home. A warning, not a
// refusal, so that an unauthenticated deployment keeps its backups until
// someone adds the key.
func warnUnauthenticated(log zerolog.Logger, st store.Store) {
	log.Warn().Str("store", st.String()).Str("docs", encryptionDocs).
		Msg("THE STORE IS NOT AUTHENTICATED: anyone who can write to the bucket can make a restore put jobs/, nodes/ and secrets/ of their choosing in the home (code execution in Jenkins). " +
			"Give restore, snapshot and prune the same key: HOMESNAP_AUTH_KEY_FILE (--auth-key-file; a Secret made with `openssl rand -hex 32`) or the age identity HOMESNAP_AGE_IDENTITY_FILE")
}
