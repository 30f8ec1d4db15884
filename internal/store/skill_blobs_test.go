package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
)

// blob is content stored under its real digest, as apply stores a skill.
func blob(content string) SkillBlob {
	sum := sha256.Sum256([]byte(content))
	return SkillBlob{Digest: "sha256:" + hex.EncodeToString(sum[:]), Content: []byte(content)}
}

func blobCount(t *testing.T, st *Store) int {
	t.Helper()
	var n int
	must(t, st.DB().QueryRow(`SELECT COUNT(*) FROM skill_blobs`).Scan(&n))
	return n
}

func hasBlob(t *testing.T, st *Store, b SkillBlob) bool {
	t.Helper()
	got, err := st.GetSkillBlob(context.Background(), b.Digest)
	if errors.Is(err, ErrNotFound) {
		return false
	}
	if err != nil || string(got) != string(b.Content) {
		t.Fatalf("blob %s: %q, %v", b.Digest, got, err)
	}
	return true
}

// Skill content is stored once per digest with the agents that reference it, shared by
// them, and collected when the last agent referencing it drops it or is deleted; a
// referenced blob cannot be deleted at all.
func TestSkillBlobsSharedAndCollected(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		v1, v2, other := blob("skill v1"), blob("skill v2"), blob("another skill")
		must(t, st.CreateAgent(ctx, Agent{ID: "a1", Name: "one", Owner: "alice", Spec: []byte("{}"), Skills: []SkillBlob{v1, other}}))
		must(t, st.CreateAgent(ctx, Agent{ID: "a2", Name: "two", Owner: "alice", Spec: []byte("{}"), Skills: []SkillBlob{v1, v1}}))
		if n := blobCount(t, st); n != 2 || !hasBlob(t, st, v1) || !hasBlob(t, st, other) {
			t.Fatalf("%d blobs after two agents sharing one; want 2", n)
		}
		if _, err := st.GetSkillBlob(ctx, v2.Digest); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a blob never stored: %v", err)
		}
		// Nobody deletes a referenced blob, not even with hand-written SQL.
		if _, err := st.Exec(ctx, `DELETE FROM skill_blobs WHERE digest = ?`, v1.Digest); err == nil {
			t.Fatal("a referenced blob was deleted")
		}

		// one moves to v2: v1 stays for two; other goes.
		must(t, st.UpdateAgent(ctx, Agent{Name: "one", Spec: []byte("{}"), Skills: []SkillBlob{v2}}))
		if !hasBlob(t, st, v1) || !hasBlob(t, st, v2) || hasBlob(t, st, other) {
			t.Fatalf("after an update: v1 %v v2 %v other %v; want v1 and v2 only", hasBlob(t, st, v1), hasBlob(t, st, v2), hasBlob(t, st, other))
		}
		// two is deleted: v1 goes with it.
		must(t, st.DeleteAgent(ctx, "two"))
		if hasBlob(t, st, v1) || !hasBlob(t, st, v2) {
			t.Fatal("v1 outlived the last agent referencing it")
		}
		// one drops its skills: nothing is left.
		must(t, st.UpdateAgent(ctx, Agent{Name: "one", Spec: []byte("{}")}))
		if n := blobCount(t, st); n != 0 {
			t.Fatalf("%d blobs left with no agent referencing any", n)
		}
		// An update of a missing agent stores nothing.
		if err := st.UpdateAgent(ctx, Agent{Name: "ghost", Spec: []byte("{}"), Skills: []SkillBlob{v1}}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("updating a missing agent: %v", err)
		}
		if n := blobCount(t, st); n != 0 {
			t.Fatalf("a failed update left %d blobs", n)
		}
	})
}

// On SQLite, content changed by hand under a digest is rewritten by the next apply that
// stores that digest (PostgreSQL refuses such content in the first place).
func TestSkillBlobRewrittenWhenTampered(t *testing.T) {
	st := openAt(t, freshURL(t, sqlite))
	ctx := context.Background()
	v1 := blob("skill v1")
	must(t, st.CreateAgent(ctx, Agent{ID: "a1", Name: "one", Owner: "alice", Spec: []byte("{}"), Skills: []SkillBlob{v1}}))
	if _, err := st.Exec(ctx, `UPDATE skill_blobs SET content = ?`, []byte("evil")); err != nil {
		t.Fatal(err)
	}
	must(t, st.UpdateAgent(ctx, Agent{Name: "one", Spec: []byte("{}"), Skills: []SkillBlob{v1}}))
	if !hasBlob(t, st, v1) {
		t.Fatal("the blob is gone")
	}
}

// On PostgreSQL blobs are shared between teams: bob reads alice's, references it from his
// own agent, and cannot change it, store other content under its digest, delete it while
// referenced, or drop alice's references; the harness reads it.
func TestRLSSkillBlobs(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	v1 := blob("alice's skill")
	must(t, p.asAlice.UpdateAgent(ctx, Agent{Name: "helper", Environment: "py", Spec: []byte("{}"), Skills: []SkillBlob{v1}}))
	for who, st := range map[string]*Store{"bob": p.asBob, "the harness": p.asHarness} {
		if got, err := st.GetSkillBlob(ctx, v1.Digest); err != nil || string(got) != string(v1.Content) {
			t.Fatalf("%s reading alice's skill: %q, %v", who, got, err)
		}
	}
	raw := p.asBob.DB()
	refused(t, raw, "bob's",
		`UPDATE skill_blobs SET content = 'evil'`,
		`DELETE FROM skill_blobs`,
		`INSERT INTO skill_blobs(digest, content, size, created_at) VALUES ('sha256:`+hex.EncodeToString(make([]byte, 32))+`', 'evil', 4, 0)`,
		`INSERT INTO agent_skills(agent, digest) VALUES ('helper', '`+v1.Digest+`')`,
	)
	if res, err := raw.Exec(`DELETE FROM agent_skills`); err == nil {
		if n, _ := res.RowsAffected(); n != 0 {
			t.Errorf("bob deleted %d of alice's skill references", n)
		}
	}
	// Bob's own agent may share the blob; alice dropping it leaves it to bob.
	must(t, p.asBob.CreateAgent(ctx, Agent{ID: "b1", Name: "bobs", Owner: p.bob, Spec: []byte("{}"), Skills: []SkillBlob{v1}}))
	must(t, p.asAlice.DeleteAgent(ctx, "helper"))
	if got, err := p.asHarness.GetSkillBlob(ctx, v1.Digest); err != nil || string(got) != string(v1.Content) {
		t.Fatalf("bob's skill after alice deleted her agent: %q, %v", got, err)
	}
	// The harness only reads.
	if _, err := p.asHarness.DB().Exec(`DELETE FROM skill_blobs`); err == nil {
		t.Error("the harness deleted skill content")
	}
	must(t, p.asBob.DeleteAgent(ctx, "bobs"))
	if _, err := p.asHarness.GetSkillBlob(ctx, v1.Digest); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the blob outlived both agents: %v", err)
	}
}
