// Package secretbox seals secret values at rest with AES-256-GCM. The key comes from
// TRUEFORGE_SECRET_KEY or from a 0600 key file beside the control-plane database.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeyEnv names the variable that may carry the key: 32 bytes, base64 or hex encoded.
const KeyEnv = "TRUEFORGE_SECRET_KEY"

// version prefixes every sealed value so the format can change later.
const version byte = 1

// checkLabel is what a key's check value is computed over. Changing it changes every
// stored check value: never do.
const checkLabel = "trueforge secret key check v1"

// Box seals and opens values.
type Box struct {
	aead  cipher.AEAD
	check string
}

// New returns a box for a 32-byte key.
func New(key []byte) (*Box, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("secret key is %d bytes; it must be 32", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(checkLabel))
	return &Box{aead: aead, check: hex.EncodeToString(mac.Sum(nil))}, nil
}

// CheckValue identifies the box's key without revealing it: HMAC-SHA256 of a fixed label
// under the key, hex encoded. Stored with a control plane's database, it tells a process
// holding another key that its key is not the one the stored values were sealed with,
// before it seals anything.
func (b *Box) CheckValue() string { return b.check }

// Load returns a box keyed from envValue (the value of TRUEFORGE_SECRET_KEY) when it is
// set, else from keyFile, creating that file with a random key (mode 0600) if missing. A
// key file that group or others can read is refused rather than silently used.
func Load(envValue, keyFile string) (*Box, error) {
	if envValue != "" {
		key, err := decodeKey(strings.TrimSpace(envValue))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", KeyEnv, err)
		}
		return New(key)
	}
	info, err := os.Stat(keyFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		key := make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Dir(keyFile), 0o700); err != nil {
			return nil, fmt.Errorf("creating key file directory: %w", err)
		}
		f, err := os.OpenFile(keyFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return Load("", keyFile) // another process created it first
		}
		if err != nil {
			return nil, fmt.Errorf("creating key file %s: %w", keyFile, err)
		}
		_, werr := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			return nil, fmt.Errorf("writing key file %s: %w", keyFile, werr)
		}
		return New(key)
	case err != nil:
		return nil, fmt.Errorf("reading key file %s: %w", keyFile, err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key file %s has mode %v; it must be readable by its owner only (chmod 600)", keyFile, info.Mode().Perm())
	}
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("reading key file %s: %w", keyFile, err)
	}
	key, err := decodeKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", keyFile, err)
	}
	return New(key)
}

func decodeKey(s string) ([]byte, error) {
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	if b, err := hex.DecodeString(s); err == nil && len(b) == 32 {
		return b, nil
	}
	return nil, errors.New("the key must be 32 bytes encoded as base64 or hex (generate one with: head -c32 /dev/urandom | base64)")
}

// Seal encrypts plaintext. aad binds the ciphertext to its row (for example the secret's
// id), so a sealed value copied onto another row does not open.
func (b *Box) Seal(plaintext []byte, aad string) ([]byte, error) {
	nonce := make([]byte, b.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	out := append([]byte{version}, nonce...)
	return b.aead.Seal(out, nonce, plaintext, []byte(aad)), nil
}

// Open decrypts a value sealed with the same key and aad.
func (b *Box) Open(sealed []byte, aad string) ([]byte, error) {
	n := b.aead.NonceSize()
	if len(sealed) < 1+n || sealed[0] != version {
		return nil, errors.New("sealed value is malformed or of an unknown version")
	}
	pt, err := b.aead.Open(nil, sealed[1:1+n], sealed[1+n:], []byte(aad))
	if err != nil {
		return nil, errors.New("sealed value does not open with this key (was TRUEFORGE_SECRET_KEY or the key file changed?)")
	}
	return pt, nil
}
