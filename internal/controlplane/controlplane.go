// Package controlplane owns the contracts that the Terraform provider, the harness and the
// sandbox backends share about one control plane beyond its database rows: where its
// secret key comes from, the labels that bind each sealed value to what it belongs to,
// where backends keep their files, and how a sandbox provider's record becomes the
// settings its backend is opened with. Each of these is spelled here once.
package controlplane

import (
	"context"
	"crypto/rand"
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

// Seal labels: every sealed value is bound to what it belongs to (the AEAD's additional
// data), so a value copied to another row does not open there.

// ProviderKeyLabel is the label of a sandbox provider's API key.
func ProviderKeyLabel(provider string) string { return "sandbox_provider/" + provider }

// SecretLabel is the label of a secret's value, by the secret's id.
func SecretLabel(secretID string) string { return "secret/" + secretID }

// EgressStateLabel is the label of a sandbox's egress proxy state (its CA and
// placeholders), by the sandbox's id.
func EgressStateLabel(sandboxID string) string { return "sandbox_egress/" + sandboxID }

// Plane is one control plane as a process uses it: its store; its secret key, loaded
// and checked against the plane on first use; its settings, read once.
type Plane struct {
	Store *store.Store
	// Getenv reads the settings this process takes from its environment (the secret key;
	// on a shared database, the data directory); nil is os.Getenv. Tests give each of
	// their control planes its own, as separate machines would have.
	Getenv func(string) string

	mu       sync.Mutex
	settings map[string]string // the store's settings, read once; nil until then
	box      *secretbox.Box    // the checked secret box; nil until then
}

// New returns the plane of st.
func New(st *store.Store) *Plane { return &Plane{Store: st} }

// setting reads one of the plane's settings, reading them all on first use, and stores
// value when it has none (value "" stores nothing). It returns the stored value. The
// caller holds p.mu.
func (p *Plane) setting(ctx context.Context, name, value string) (string, error) {
	if p.settings == nil {
		all, err := p.Store.Settings(ctx)
		if err != nil {
			return "", err
		}
		p.settings = all
	}
	if v, ok := p.settings[name]; ok || value == "" {
		return v, nil
	}
	v, err := p.Store.InitSetting(ctx, name, value)
	if err != nil {
		return "", err
	}
	p.settings[name] = v
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

// settingPlaneID names the plane's id among its settings (shared databases only).
const settingPlaneID = "plane_id"

// ID is a short, stable identifier of this control plane: remote objects are labelled
// with it, so that two control planes that share one backend account never list or sweep
// each other's. On SQLite it is a hash of the database's absolute path (moving the
// database changes it); on a shared database it is 16 random hex digits stored with the
// plane by the first process that needs it, so every machine agrees.
func (p *Plane) ID(ctx context.Context) (string, error) {
	if !p.Store.Shared() {
		abs, err := filepath.Abs(p.Store.Path())
		if err != nil {
			abs = p.Store.Path()
		}
		sum := sha256.Sum256([]byte(abs))
		return hex.EncodeToString(sum[:])[:16], nil
	}
	fresh := make([]byte, 8)
	if _, err := rand.Read(fresh); err != nil {
		return "", err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	id, err := p.setting(ctx, settingPlaneID, hex.EncodeToString(fresh))
	if err != nil {
		return "", fmt.Errorf("the control plane's id: %w", err)
	}
	return id, nil
}

// Provider is a sandbox provider's record as its backend is opened with it: its settings,
// its API key opened (in memory only, never logged), the plane's data directory and id.
func (p *Plane) Provider(ctx context.Context, rec store.SandboxProvider) (sandbox.ProviderConfig, error) {
	id, err := p.ID(ctx)
	if err != nil {
		return sandbox.ProviderConfig{}, err
	}
	cfg := sandbox.ProviderConfig{
		Name: rec.Name, Type: rec.Type, APIURL: rec.APIURL, Target: rec.Target,
		RequireLimits: rec.RequireLimits, DataDir: p.DataDir(), Plane: id,
	}
	if len(rec.APIKeyEnc) > 0 {
		key, err := p.Open(ctx, rec.APIKeyEnc, ProviderKeyLabel(rec.Name), fmt.Sprintf("the API key of sandbox provider %q", rec.Name))
		if err != nil {
			return cfg, err
		}
		cfg.APIKey = string(key)
	}
	return cfg, nil
}
