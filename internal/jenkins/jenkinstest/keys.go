// Package jenkinstest writes Jenkins keys in their real formats into a
// home, for tests that need a controller whose agents can reconnect: a
// master.key, ConfidentialStore keys wrapped under it with the MAGIC
// marker, an agent key, and an RSA instance identity.
package jenkinstest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"os"
	"path/filepath"

	"github.com/homesnap/homesnap/internal/jenkins"
)

// WriteKeys gives home a fresh set of keys, as a Jenkins controller does
// on its first start: a new master.key, the hudson.util.Secret, agent and
// identity keys, a new identity, and every other key file already in
// secrets/ wrapped anew (a payload 16 bytes shorter than the file, which is
// how Jenkins' key sizes come out).
func WriteKeys(home string) error {
	master := make([]byte, 128)
	rand.Read(master)
	if err := write(home, jenkins.MasterKeyPath, []byte(hex.EncodeToString(master)), 0o644); err != nil {
		return err
	}
	storeKey := jenkins.StoreKey([]byte(hex.EncodeToString(master)))
	entries, _ := os.ReadDir(filepath.Join(home, jenkins.SecretsDir))
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && jenkins.IsKeyFile(e.Name()) && fi.Size() > 16 {
			if err := WrapKey(home, storeKey, jenkins.SecretsDir+"/"+e.Name(), int(fi.Size())-16); err != nil {
				return err
			}
		}
	}
	for _, k := range []struct {
		path string
		size int
	}{
		{jenkins.SecretKeyPath, 256},
		{jenkins.AgentKeyPath, 32},
		{jenkins.IdentityKeyPath, 256},
	} {
		if err := WrapKey(home, storeKey, k.path, k.size); err != nil {
			return err
		}
	}
	return WriteIdentity(home)
}

// WrapKey writes a new random key of size bytes at rel, wrapped under
// storeKey (see jenkins.StoreKey).
func WrapKey(home string, storeKey []byte, rel string, size int) error {
	payload := make([]byte, size)
	rand.Read(payload)
	return write(home, rel, jenkins.Wrap(storeKey, payload), 0o644)
}

// WriteIdentity makes a new RSA instance identity and writes it to
// identity.key.enc, encrypted with the home's identity key (which master.key
// must unwrap).
func WriteIdentity(home string) error {
	master, err := os.ReadFile(filepath.Join(home, jenkins.MasterKeyPath))
	if err != nil {
		return err
	}
	blob, err := os.ReadFile(filepath.Join(home, jenkins.IdentityKeyPath))
	if err != nil {
		return err
	}
	key, err := jenkins.Unwrap(jenkins.StoreKey(master), blob)
	if err != nil {
		return err
	}
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return err
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	return write(home, jenkins.IdentityPath, jenkins.EncryptIdentity(key, pemKey), 0o600)
}

// InboundNode writes nodes/<name>/config.xml for an inbound agent, over
// WebSocket when webSocket is set.
func InboundNode(home, name string, webSocket bool) error {
	ws := "false"
	if webSocket {
		ws = "true"
	}
	return write(home, "nodes/"+name+"/config.xml", []byte(`<?xml version='1.1' encoding='UTF-8'?>
<slave>
  <name>`+name+`</name>
  <description></description>
  <remoteFS>/home/jenkins/agent</remoteFS>
  <numExecutors>1</numExecutors>
  <mode>NORMAL</mode>
  <retentionStrategy class="hudson.slaves.RetentionStrategy$Always"/>
  <launcher class="hudson.slaves.JNLPLauncher">
    <workDirSettings>
      <disabled>false</disabled>
      <internalDir>remoting</internalDir>
      <failIfWorkDirIsMissing>false</failIfWorkDirIsMissing>
    </workDirSettings>
    <webSocket>`+ws+`</webSocket>
  </launcher>
  <label></label>
  <nodeProperties/>
</slave>`), 0o644)
}

func write(home, rel string, data []byte, mode os.FileMode) error {
	p := filepath.Join(home, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp-jenkinstest"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
