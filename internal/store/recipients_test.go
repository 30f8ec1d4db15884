package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// An artifact keeps its detected type; a release is listed with its session's files,
// replaced by a second release to the same user, refused for an artifact that does not
// exist, and gone with its session.
func TestArtifactReleases(t *testing.T) {
	eachDB(t, func(t *testing.T, st *Store) {
		ctx := context.Background()
		for _, id := range []string{"s1", "s2"} {
			must(t, st.CreateSession(ctx, Session{ID: id, Agent: "a", Owner: "alice"}))
		}
		now := time.UnixMilli(1_700_000_000_000)
		must(t, st.PutArtifact(ctx, Artifact{ID: "a1", SessionID: "s1", Path: "plan.pdf", SHA256: "x", Classification: "restricted",
			DetectedType: "pdf", Content: []byte("x"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
		must(t, st.PutArtifact(ctx, Artifact{ID: "a2", SessionID: "s2", Path: "b.txt", SHA256: "y", Classification: "restricted",
			Content: []byte("y"), CreatedAt: now, ExpiresAt: now.Add(time.Hour)}))
		if a, err := st.GetArtifact(ctx, "s1", "plan.pdf"); err != nil || a.DetectedType != "pdf" {
			t.Fatalf("GetArtifact: %+v, %v", a, err)
		}
		if rs, err := st.SessionReleases(ctx, "s1"); err != nil || len(rs) != 0 {
			t.Fatalf("before any release: %+v, %v", rs, err)
		}
		must(t, st.PutRelease(ctx, Release{ArtifactID: "a1", To: "bob", By: "root", At: now, Note: "for the audit"}))
		must(t, st.PutRelease(ctx, Release{ArtifactID: "a1", To: ReleaseToAll, By: "root", At: now.Add(time.Second)}))
		must(t, st.PutRelease(ctx, Release{ArtifactID: "a1", To: "bob", By: "ops", At: now.Add(2 * time.Second), Note: "again"}))
		must(t, st.PutRelease(ctx, Release{ArtifactID: "a2", To: "carol", By: "root", At: now}))
		rs, err := reopen(t, st).SessionReleases(ctx, "s1")
		if err != nil || len(rs) != 2 || rs[0].To != ReleaseToAll || rs[1].To != "bob" || rs[1].By != "ops" || rs[1].Note != "again" ||
			!rs[1].At.Equal(now.Add(2*time.Second)) || rs[1].ArtifactID != "a1" {
			t.Fatalf("SessionReleases: %+v, %v", rs, err)
		}
		if err := st.PutRelease(ctx, Release{ArtifactID: "nope", To: "bob", By: "root", At: now}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("releasing a missing artifact: %v; want ErrNotFound", err)
		}
		must(t, st.DeleteSession(ctx, "s1"))
		if rs, err := st.SessionReleases(ctx, "s1"); err != nil || len(rs) != 0 {
			t.Fatalf("after the session's delete: %+v, %v", rs, err)
		}
		var n int
		must(t, st.QueryRow(ctx, `SELECT COUNT(*) FROM artifact_releases`).Scan(&n))
		if n != 1 {
			t.Fatalf("%d releases left; want s2's one", n)
		}
	})
}

// The harness's role records and reads releases on PostgreSQL (a runtime table); a
// team cannot read them.
func TestArtifactReleasesHarnessRole(t *testing.T) {
	p := newRLSPlane(t)
	ctx := context.Background()
	h := p.asHarness
	must(t, h.CreateSession(ctx, Session{ID: "s1", Agent: "helper", Owner: "alice"}))
	now := time.Now()
	must(t, h.PutArtifact(ctx, Artifact{ID: "a1", SessionID: "s1", Path: "p", SHA256: "x", Classification: "restricted", Content: []byte("x"), CreatedAt: now, ExpiresAt: now}))
	must(t, h.PutRelease(ctx, Release{ArtifactID: "a1", To: "bob", By: "root", At: now}))
	if rs, err := h.SessionReleases(ctx, "s1"); err != nil || len(rs) != 1 {
		t.Fatalf("as the harness: %+v, %v", rs, err)
	}
	if _, err := p.asAlice.SessionReleases(ctx, "s1"); err == nil {
		t.Error("a team read the releases")
	}
}
