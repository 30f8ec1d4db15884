// Package controlplane owns the contracts that the Terraform provider, the harness and the
// sandbox backends share about one control plane beyond its database rows: where its
// secret key comes from, the labels that bind each sealed value to what it belongs to,
// where backends keep their files, and how a sandbox provider's record becomes the
// settings its backend is opened with. Each of these is spelled here once.
package controlplane

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// KeyFileName is the secret key's file beside the database, used when the key variable
// (secretbox.KeyEnv, TRUEFORGE_SECRET_KEY) is not set. It is created with a random key,
// mode 0600, on first use; one readable by group or others is refused.
const KeyFileName = "secret.key"

// Seal labels: every sealed value is bound to what it belongs to (the AEAD's additional
// data), so a value copied to another row does not open there.

// ProviderKeyLabel is the label of a sandbox provider's API key.
func ProviderKeyLabel(provider string) string { return "sandbox_provider/" + provider }

// SecretLabel is the label of a secret's value, by the secret's id.
func SecretLabel(secretID string) string { return "secret/" + secretID }

// EgressStateLabel is the label of a sandbox's egress proxy state (its CA and
// placeholders), by the sandbox's id.
func EgressStateLabel(sandboxID string) string { return "sandbox_egress/" + sandboxID }

// Plane is one control plane as a process uses it: its store, and its secret key,
// loaded once on first use.
type Plane struct {
	Store *store.Store
	// Getenv reads the settings this process takes from its environment (the secret key;
	// on a shared database, the data directory); nil is os.Getenv. Tests give each of
	// their control planes its own, as separate machines would have.
	Getenv func(string) string

	boxOnce sync.Once
	box     *secretbox.Box
	boxErr  error
}

// New returns the plane of st.
func New(st *store.Store) *Plane { return &Plane{Store: st} }

// KeyFile is the secret key's file of the plane.
func (p *Plane) KeyFile() string { return filepath.Join(p.Store.Dir(), KeyFileName) }

// SecretBox returns the box that seals the plane's secrets: keyed from
// TRUEFORGE_SECRET_KEY when it is set, else from the key file.
func (p *Plane) SecretBox() (*secretbox.Box, error) {
	p.boxOnce.Do(func() {
		p.box, p.boxErr = secretbox.Load(p.getenv(secretbox.KeyEnv), p.KeyFile())
		if p.boxErr != nil {
			p.boxErr = fmt.Errorf("the control plane's secret key (%s, else %s): %w", secretbox.KeyEnv, p.KeyFile(), p.boxErr)
		}
	})
	return p.box, p.boxErr
}

// Seal seals value under label.
func (p *Plane) Seal(value []byte, label string) ([]byte, error) {
	box, err := p.SecretBox()
	if err != nil {
		return nil, err
	}
	return box.Seal(value, label)
}

// Open opens a value sealed under label; what says what it is, for the error.
func (p *Plane) Open(sealed []byte, label, what string) ([]byte, error) {
	box, err := p.SecretBox()
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", what, err)
	}
	v, err := box.Open(sealed, label)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be opened with this control plane's secret key (%s, else %s; was it changed?): %w",
			what, secretbox.KeyEnv, p.KeyFile(), err)
	}
	return v, nil
}

// getenv reads a setting from the process's environment (Getenv).
func (p *Plane) getenv(name string) string {
	if p.Getenv != nil {
		return p.Getenv(name)
	}
	return os.Getenv(name)
}

// DataDir is where backends of this plane keep their files on this machine: beside an
// SQLite database; for a shared one, store.DataDirEnv (TRUEFORGE_DATA_DIR) as Getenv
// reads it, else the store's default (Store.Dir).
func (p *Plane) DataDir() string {
	if p.Store.Shared() {
		if d := p.getenv(store.DataDirEnv); d != "" {
			if abs, err := filepath.Abs(d); err == nil {
				return abs
			}
			return d
		}
	}
	return p.Store.Dir()
}

// EgressDir is where the harness's egress proxies keep their sockets: local-backend/egress
// under the data directory, where harnesses have always put them. Running sandboxes bind
// their socket's directory, so it never moves.
func (p *Plane) EgressDir() string { return filepath.Join(p.DataDir(), "local-backend", "egress") }

// ID is a short, stable identifier of this control plane (a hash of the database's
// absolute path): remote objects are labelled with it, so that two control planes that
// share one backend account never list or sweep each other's. Moving the database
// changes it.
func (p *Plane) ID() string {
	abs, err := filepath.Abs(p.Store.Path())
	if err != nil {
		abs = p.Store.Path()
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:])[:16]
}

// Provider is a sandbox provider's record as its backend is opened with it: its settings,
// its API key opened (in memory only, never logged), the plane's data directory and id.
func (p *Plane) Provider(rec store.SandboxProvider) (sandbox.ProviderConfig, error) {
	cfg := sandbox.ProviderConfig{
		Name: rec.Name, Type: rec.Type, APIURL: rec.APIURL, Target: rec.Target,
		RequireLimits: rec.RequireLimits, DataDir: p.DataDir(), Plane: p.ID(),
	}
	if len(rec.APIKeyEnc) > 0 {
		key, err := p.Open(rec.APIKeyEnc, ProviderKeyLabel(rec.Name), fmt.Sprintf("the API key of sandbox provider %q", rec.Name))
		if err != nil {
			return cfg, err
		}
		cfg.APIKey = string(key)
	}
	return cfg, nil
}
