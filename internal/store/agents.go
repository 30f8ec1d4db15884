package store

import (
	"context"
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
	// Skills is the content of the skills Spec references. CreateAgent and UpdateAgent
	// store it with the spec and make it the agent's references, deleting content the
	// agent no longer references that no other agent does (skill_blobs.go); reads leave
	// it empty.
	Skills []SkillBlob
}

// CreateAgent stores a new agent. The version of its environment it pins, if any, is
// kept from collection while it does (version_pins.go).
func (s *Store) CreateAgent(ctx context.Context, a Agent) error {
	return s.createAs(ctx, a.Owner, func(tx *txn, now int64) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO agents(id, name, owner, environment, environment_version, spec, created_at, updated_at) VALUES (?, ?, ?, NULLIF(?, ''), ?, ?, ?, ?)`,
			a.ID, a.Name, a.Owner, a.Environment, agentPin(a.Spec), string(a.Spec), now, now)
		if err := inserted(err, notFound("environment %q", a.Environment), "agent %q", a.Name); err != nil {
			return err
		}
		return setAgentSkills(ctx, tx, a.Name, a.Skills, now)
	})
}

// UpdateAgent replaces an agent's environment, spec and skills (and the version it pins:
// one it no longer pins is collected by the next collection, past keep_versions).
func (s *Store) UpdateAgent(ctx context.Context, a Agent) error {
	return s.inTx(ctx, func(tx *txn) error {
		now := s.stamp()
		res, err := tx.ExecContext(ctx, `UPDATE agents SET environment = NULLIF(?, ''), environment_version = ?, spec = ?, updated_at = ? WHERE name = ?`,
			a.Environment, agentPin(a.Spec), string(a.Spec), now, a.Name)
		if isForeignKey(err) {
			return fmt.Errorf("environment %q: %w", a.Environment, ErrNotFound)
		}
		if err := changedOne(res, err, "updating", "agent %q", a.Name); err != nil {
			return err
		}
		return setAgentSkills(ctx, tx, a.Name, a.Skills, now)
	})
}

// GetAgent reads an agent by name.
func (s *Store) GetAgent(ctx context.Context, name string) (Agent, error) {
	return getRow(ctx, s, (*configSnapshot).agent, scanAgent, agentSelect+` WHERE name = ?`, name, "agent %q")
}

const agentSelect = `SELECT id, name, owner, COALESCE(environment, ''), spec FROM agents`

func scanAgent(sc scanner) (Agent, error) {
	var a Agent
	var spec string
	if err := sc.Scan(&a.ID, &a.Name, &a.Owner, &a.Environment, &spec); err != nil {
		return a, err
	}
	a.Spec = []byte(spec)
	return a, nil
}

// DeleteAgent removes an agent, and the skill content only it referenced; a missing
// agent is ErrNotFound.
func (s *Store) DeleteAgent(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *txn) error {
		skills, err := agentSkillDigests(ctx, tx, name)
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM agents WHERE name = ?`, name)
		if err := changedOne(res, err, "deleting", "agent %q", name); err != nil {
			return err
		}
		for _, d := range skills {
			if err := collectSkillBlob(ctx, tx, d); err != nil {
				return err
			}
		}
		return nil
	})
}
