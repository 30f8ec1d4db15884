package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// Secret is a network-scoped credential of an environment. The value is sealed by the
// caller (see package secretbox); the store never sees plaintext.
type Secret struct {
	ID          string // "<environment>/<env_name>"
	Environment string
	EnvName     string
	Hosts       []string
	ValueEnc    []byte
	Version     int64 // bumped on every rotation
}

// SecretID is the identifier of a secret: environment and variable name.
func SecretID(environment, envName string) string { return environment + "/" + envName }

// CreateSecret stores a new secret.
func (s *Store) CreateSecret(ctx context.Context, sec Secret) error {
	hosts, _ := json.Marshal(nonNil(sec.Hosts))
	now := s.stamp()
	_, err := s.db.ExecContext(ctx, `INSERT INTO secrets(id, environment, env_name, hosts, value_enc, version, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?)`,
		sec.ID, sec.Environment, sec.EnvName, string(hosts), sec.ValueEnc, now, now)
	return inserted(err, notFound("environment %q", sec.Environment), "secret %s", sec.ID)
}

// UpdateSecret changes hosts and, when valueEnc is not nil, rotates the value.
func (s *Store) UpdateSecret(ctx context.Context, id string, hosts []string, valueEnc []byte) error {
	h, _ := json.Marshal(nonNil(hosts))
	var res sql.Result
	var err error
	if valueEnc != nil {
		res, err = s.db.ExecContext(ctx, `UPDATE secrets SET hosts = ?, value_enc = ?, version = version + 1, updated_at = ? WHERE id = ?`, string(h), valueEnc, s.stamp(), id)
	} else {
		res, err = s.db.ExecContext(ctx, `UPDATE secrets SET hosts = ?, updated_at = ? WHERE id = ?`, string(h), s.stamp(), id)
	}
	return changedOne(res, err, "updating", "secret %s", id)
}

const secretSelect = `SELECT id, environment, env_name, hosts, value_enc, version FROM secrets`

func scanSecret(sc scanner) (Secret, error) {
	var sec Secret
	var hosts string
	if err := sc.Scan(&sec.ID, &sec.Environment, &sec.EnvName, &hosts, &sec.ValueEnc, &sec.Version); err != nil {
		return sec, err
	}
	_ = json.Unmarshal([]byte(hosts), &sec.Hosts)
	return sec, nil
}

// GetSecret reads a secret by id.
func (s *Store) GetSecret(ctx context.Context, id string) (Secret, error) {
	return getRow(ctx, s, (*configSnapshot).secret, scanSecret, secretSelect+` WHERE id = ?`, id, "secret %s")
}

// ListSecrets returns an environment's secrets ordered by variable name.
func (s *Store) ListSecrets(ctx context.Context, environment string) ([]Secret, error) {
	if c := s.config(ctx); c != nil {
		return c.secretsOf(environment), nil
	}
	secrets, err := queryRows(ctx, s.db, scanSecret, secretSelect+` WHERE environment = ? ORDER BY env_name`, environment)
	if err != nil {
		return nil, fmt.Errorf("listing secrets of environment %q: %w", environment, err)
	}
	return secrets, nil
}

// DeleteSecret removes a secret; a missing one is ErrNotFound.
func (s *Store) DeleteSecret(ctx context.Context, id string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM secrets WHERE id = ?`, id)
	return changedOne(res, err, "deleting", "secret %s", id)
}
