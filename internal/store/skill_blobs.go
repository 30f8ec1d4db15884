package store

import (
	"context"
	"fmt"
	"slices"
)

// Skills' content (migration 9). Apply stores each skill an agent lists as a blob keyed
// by its digest (the SHA-256 of the folder's canonical encoding, package skills), in the
// same transaction as the agent's spec that references it, so the harness never sees a
// spec whose skill is missing. agent_skills records the references; a blob that no agent
// references any more is deleted when the agent that dropped it is updated or deleted
// (the foreign key refuses to delete one that is still referenced, whoever tries).
// Blobs are shared between agents and teams, like snapshots: on PostgreSQL every team
// reads them all and inserts new ones, the database checks that content hashes to its
// digest, and nobody may update one.

// SkillBlob is one skill's stored content.
type SkillBlob struct {
	Digest  string
	Content []byte
}

// GetSkillBlob reads the content stored under digest; a missing one is ErrNotFound.
func (s *Store) GetSkillBlob(ctx context.Context, digest string) ([]byte, error) {
	var content []byte
	err := s.db.QueryRowContext(ctx, `SELECT content FROM skill_blobs WHERE digest = ?`, digest).Scan(&content)
	return found(content, err, "reading", "skill content %s", digest)
}

// setAgentSkills makes blobs agent's skills: stores the ones that are new, replaces the
// agent's references with theirs, and deletes what the agent referenced before that
// nothing references now.
func setAgentSkills(ctx context.Context, tx *txn, agent string, blobs []SkillBlob, now int64) error {
	before, err := agentSkillDigests(ctx, tx, agent)
	if err != nil {
		return err
	}
	if len(before) > 0 {
		if _, err := tx.ExecContext(ctx, `DELETE FROM agent_skills WHERE agent = ?`, agent); err != nil {
			return fmt.Errorf("replacing the skills of agent %q: %w", agent, err)
		}
	}
	// SQLite has no check that content hashes to its digest, so a row changed by hand is
	// rewritten by the next apply; PostgreSQL's check makes equal digests equal content
	// (and teams may not update blobs).
	insert := `INSERT INTO skill_blobs(digest, content, size, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT(digest) DO UPDATE SET content = excluded.content, size = excluded.size WHERE skill_blobs.content <> excluded.content`
	if tx.d.dialect == postgres {
		insert = `INSERT INTO skill_blobs(digest, content, size, created_at) VALUES (?, ?, ?, ?) ON CONFLICT(digest) DO NOTHING`
	}
	var after []string
	for _, b := range blobs {
		if slices.Contains(after, b.Digest) {
			continue // two skills of the agent with the same content
		}
		after = append(after, b.Digest)
		if _, err := tx.ExecContext(ctx, insert, b.Digest, b.Content, len(b.Content), now); err != nil {
			return fmt.Errorf("storing skill content %s of agent %q: %w", b.Digest, agent, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO agent_skills(agent, digest) VALUES (?, ?)`, agent, b.Digest); err != nil {
			return fmt.Errorf("recording skill %s of agent %q: %w", b.Digest, agent, err)
		}
	}
	for _, d := range before {
		if !slices.Contains(after, d) {
			if err := collectSkillBlob(ctx, tx, d); err != nil {
				return err
			}
		}
	}
	return nil
}

// agentSkillDigests lists the blobs agent references.
func agentSkillDigests(ctx context.Context, tx *txn, agent string) ([]string, error) {
	digests, err := queryRows(ctx, tx, scanString, `SELECT digest FROM agent_skills WHERE agent = ? ORDER BY digest`, agent)
	if err != nil {
		return nil, fmt.Errorf("reading the skills of agent %q: %w", agent, err)
	}
	return digests, nil
}

// collectSkillBlob deletes blob digest when no agent references it.
func collectSkillBlob(ctx context.Context, tx *txn, digest string) error {
	_, err := tx.ExecContext(ctx, `DELETE FROM skill_blobs WHERE digest = ? AND NOT EXISTS (SELECT 1 FROM agent_skills r WHERE r.digest = skill_blobs.digest)`, digest)
	if err != nil {
		return fmt.Errorf("collecting unreferenced skill content %s: %w", digest, err)
	}
	return nil
}
