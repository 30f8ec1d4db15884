package controlplane

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/trueforge/terraform-provider-trueforge/internal/secretbox"
)

// KeyFileName is the secret key's file beside an SQLite database, used when the key
// variable (secretbox.KeyEnv, TRUEFORGE_SECRET_KEY) is not set. It is created with a
// random key, mode 0600, on first use; one readable by group or others is refused. A
// control plane on a shared database has no key file: every machine that uses it sets
// the variable to the same key.
const KeyFileName = "secret.key"

// settingKeyCheck names the secret key's check value (secretbox.Box.CheckValue) among
// the plane's settings.
const settingKeyCheck = "secret_key_check"

// Errors of the secret key, wrapped with what to do; use errors.Is.
var (
	// ErrKeyRequired means the database is shared and TRUEFORGE_SECRET_KEY is not set.
	ErrKeyRequired = errors.New("the secret key is required")
	// ErrWrongKey means the key is not the one the plane's values are sealed with.
	ErrWrongKey = errors.New("not this control plane's secret key")
)

// KeyFile is the secret key's file of the plane (used on SQLite only).
func (p *Plane) KeyFile() string { return filepath.Join(p.Store.Dir(), KeyFileName) }

// keySource names where the key comes from, for errors.
func (p *Plane) keySource() string {
	if p.getenv(secretbox.KeyEnv) != "" || p.Store.Shared() {
		return secretbox.KeyEnv
	}
	return "the key file " + p.KeyFile()
}

// SecretBox returns the box that seals the plane's secrets, keyed from
// TRUEFORGE_SECRET_KEY when it is set, else (SQLite only) from the key file, and checked
// against the plane: the first process to load a key stores its check value with the
// plane's settings; every later load compares, so a process with another key (another
// machine's, or a swapped key file) is refused here, before it seals or writes anything,
// with the key's source named.
func (p *Plane) SecretBox(ctx context.Context) (*secretbox.Box, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.box != nil {
		return p.box, nil
	}
	env := p.getenv(secretbox.KeyEnv)
	if env == "" && p.Store.Shared() {
		return nil, fmt.Errorf("%w: %s is not set. This control plane's database is on %s and shared by every machine that applies "+
			"or runs agents, so all of them need the same key, and none is created beside it. Generate a key once "+
			"(head -c32 /dev/urandom | base64), keep it in your secret store, and set %s to it on every machine and in CI",
			ErrKeyRequired, secretbox.KeyEnv, p.Store.Dialect(), secretbox.KeyEnv)
	}
	box, err := secretbox.Load(env, p.KeyFile())
	if err != nil {
		return nil, fmt.Errorf("the control plane's secret key (%s): %w", p.keySource(), err)
	}
	stored, err := p.setting(ctx, settingKeyCheck, box.CheckValue())
	if err != nil {
		return nil, fmt.Errorf("checking the control plane's secret key: %w", err)
	}
	if stored != box.CheckValue() {
		return nil, fmt.Errorf("%s is %w: the values stored in this control plane were sealed with a key whose check value begins %s, "+
			"and this key's begins %s. Set %s to the key the other machines of this control plane use%s; nothing was written with this one",
			p.keySource(), ErrWrongKey, short(stored), short(box.CheckValue()), secretbox.KeyEnv, p.keyFileHint())
	}
	p.box = box
	return box, nil
}

// keyFileHint is what else fixes a wrong key on SQLite: the original key file.
func (p *Plane) keyFileHint() string {
	if p.Store.Shared() {
		return ""
	}
	return " (or restore the key file " + p.KeyFile() + " that was beside the database)"
}

// short is the beginning of a check value: enough to compare keys across machines.
func short(check string) string {
	if len(check) > 12 {
		return check[:12]
	}
	return check
}

// Seal seals value under label.
func (p *Plane) Seal(ctx context.Context, value []byte, label string) ([]byte, error) {
	box, err := p.SecretBox(ctx)
	if err != nil {
		return nil, err
	}
	return box.Seal(value, label)
}

// Open opens a value sealed under label; what says what it is, for the error.
func (p *Plane) Open(ctx context.Context, sealed []byte, label, what string) ([]byte, error) {
	box, err := p.SecretBox(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", what, err)
	}
	v, err := box.Open(sealed, label)
	if err != nil {
		return nil, fmt.Errorf("%s cannot be opened with this control plane's secret key (%s): %w", what, p.keySource(), err)
	}
	return v, nil
}
