package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Agent is a published agent. Spec is the JSON document the harness runs (model, tools,
// sandbox settings); Environment is pulled out so the database enforces the reference.
// An agent whose sandbox is off references no environment: Environment is "" (NULL in
// the table).
type Agent struct {
	ID          string
	Name        string
	Owner       string
	Environment string
	Spec        []byte
}

// CreateAgent stores a new agent.
func (s *Store) CreateAgent(ctx context.Context, a Agent) error {
	return s.inTx(ctx, func(tx *txn) error {
		now := s.stamp()
		if err := ensureOwner(ctx, tx, a.Owner, now); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO agents(id, name, owner, environment, spec, created_at, updated_at) VALUES (?, ?, ?, NULLIF(?, ''), ?, ?, ?)`,
			a.ID, a.Name, a.Owner, a.Environment, string(a.Spec), now, now)
		switch {
		case isUnique(err):
			return fmt.Errorf("agent %q: %w", a.Name, ErrAlreadyExists)
		case isForeignKey(err):
			return fmt.Errorf("environment %q: %w", a.Environment, ErrNotFound)
		case err != nil:
			return fmt.Errorf("creating agent %q: %w", a.Name, err)
		}
		return nil
	})
}

// UpdateAgent replaces an agent's environment and spec.
func (s *Store) UpdateAgent(ctx context.Context, a Agent) error {
	res, err := s.db.ExecContext(ctx, `UPDATE agents SET environment = NULLIF(?, ''), spec = ?, updated_at = ? WHERE name = ?`, a.Environment, string(a.Spec), s.stamp(), a.Name)
	switch {
	case isForeignKey(err):
		return fmt.Errorf("environment %q: %w", a.Environment, ErrNotFound)
	case err != nil:
		return fmt.Errorf("updating agent %q: %w", a.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("agent %q: %w", a.Name, ErrNotFound)
	}
	return nil
}

// GetAgent reads an agent by name.
func (s *Store) GetAgent(ctx context.Context, name string) (Agent, error) {
	if c := s.config(ctx); c != nil {
		return c.agent(name)
	}
	a, err := scanAgent(s.db.QueryRowContext(ctx, agentSelect+` WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return a, agentNotFound(name)
	}
	if err != nil {
		return a, fmt.Errorf("reading agent %q: %w", name, err)
	}
	return a, nil
}

func agentNotFound(name string) error { return fmt.Errorf("agent %q: %w", name, ErrNotFound) }

const agentSelect = `SELECT id, name, owner, COALESCE(environment, ''), spec FROM agents`

func scanAgent(sc interface{ Scan(...any) error }) (Agent, error) {
	var a Agent
	var spec string
	if err := sc.Scan(&a.ID, &a.Name, &a.Owner, &a.Environment, &spec); err != nil {
		return a, err
	}
	a.Spec = []byte(spec)
	return a, nil
}

// DeleteAgent removes an agent; a missing one is ErrNotFound.
func (s *Store) DeleteAgent(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM agents WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("deleting agent %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("agent %q: %w", name, ErrNotFound)
	}
	return nil
}
