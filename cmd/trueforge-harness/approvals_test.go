package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox/sandboxtest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// askStore is a fresh control plane with alice's session s-ask.
func askStore(t *testing.T) *store.Store {
	t.Helper()
	st := storetest.Open(t, filepath.Join(t.TempDir(), "db.sqlite"))
	if err := st.CreateSession(context.Background(), store.Session{ID: "s-ask", Agent: "pr-bot", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	return st
}

// chat asks its user about a call of the session that waits for them, and the next line
// decides it: "n" and a note deny it with the note; an approval for another user's
// decision is not asked about.
func TestChatAsksForApprovals(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := askStore(t)
	mine := store.Approval{ID: approvals.NewID(), SessionID: "s-ask", User: "alice", Agent: "pr-bot", Kind: store.ApprovalKindMCPCall,
		Server: "https://git.example", Tool: "create_pull_request", Arguments: `{"title":"Fix \u001b[31m"}`, Rule: 0,
		Reason: "pull requests need a person", Approvers: []string{"$caller"}, Deadline: time.Now().Add(time.Minute)}
	leads := mine
	leads.ID, leads.Approvers = approvals.NewID(), []string{"lead-*"}
	for _, a := range []store.Approval{mine, leads} {
		if err := st.CreateApproval(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	lines := make(chan string, 1)
	lines <- "n not on Fridays"
	out := &sandboxtest.SyncBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		askApprovals(ctx, st, "alice", "s-ask", out, lines)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := st.GetApproval(ctx, mine.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a.State != store.ApprovalPending {
			if a.State != store.ApprovalDenied || a.DecidedBy != "alice" || a.Note != "not on Fridays" {
				t.Fatalf("decided %+v; want denied by alice with the note", a)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not decided; output:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	text := out.String()
	if !strings.Contains(text, "pr-bot wants to call create_pull_request on https://git.example") || !strings.Contains(text, "DENIED "+mine.ID) {
		t.Fatalf("output:\n%s", text)
	}
	if strings.Contains(text, "\x1b[31m") {
		t.Fatalf("the arguments reached the terminal unescaped:\n%q", text)
	}
	if strings.Contains(text, leads.ID) {
		t.Fatalf("alice was asked about an approval only leads may decide:\n%s", text)
	}
	if a, _ := st.GetApproval(context.Background(), leads.ID); a.State != store.ApprovalPending {
		t.Fatalf("the leads' approval was decided: %+v", a)
	}
}

// question is a pending elicitation of session s-ask: a required name and a count with
// a default.
func question(t *testing.T, st *store.Store) store.Approval {
	t.Helper()
	a := store.Approval{ID: approvals.NewID(), SessionID: "s-ask", User: "alice", Agent: "pr-bot", Kind: store.ApprovalKindElicitation,
		Server: "https://git.example", Tool: "git", Rule: -1, Reason: "Which release?", Approvers: []string{"$caller"},
		Schema:   `{"type":"object","properties":{"name":{"type":"string"},"count":{"type":"integer","minimum":1,"default":1}},"required":["name"]}`,
		Deadline: time.Now().Add(time.Minute)}
	if err := st.CreateApproval(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	return a
}

// waitDecided waits until approval id is no longer pending.
func waitDecided(t *testing.T, st *store.Store, id string, out *sandboxtest.SyncBuffer) store.Approval {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		a, err := st.GetApproval(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if a.State != store.ApprovalPending {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("approval %s not decided; output:\n%s", id, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// chat asks a server's question field by field: the required name, then the count,
// whose empty answer keeps its default.
func TestChatAnswersAQuestion(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := askStore(t)
	a := question(t, st)
	lines := make(chan string, 2)
	lines <- "v1.2"
	lines <- ""
	out := &sandboxtest.SyncBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		askApprovals(ctx, st, "alice", "s-ask", out, lines)
	}()
	got := waitDecided(t, st, a.ID, out)
	cancel()
	<-done
	if got.State != store.ApprovalApproved || got.Response != `{"count":1,"name":"v1.2"}` {
		t.Fatalf("answered %+v; want approved with name v1.2 and the default count", got)
	}
	if !strings.Contains(out.String(), "asks: Which release?") {
		t.Fatalf("output:\n%s", out.String())
	}
}

// run declines a server's question, or with --yes accepts it with its defaults when
// they make an answer the schema accepts (here they do not: name has none).
func TestRunDeclinesQuestions(t *testing.T) {
	for _, yes := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		st := askStore(t)
		a := question(t, st)
		out := &sandboxtest.SyncBuffer{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			answerQuestions(ctx, st, "alice", "s-ask", yes, out)
		}()
		got := waitDecided(t, st, a.ID, out)
		cancel()
		<-done
		if got.State != store.ApprovalDenied {
			t.Fatalf("yes=%v: %+v; want declined (the defaults lack the required name)", yes, got)
		}
	}
	// With a default for every required field, --yes accepts the defaults.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := askStore(t)
	a := question(t, st)
	b := a
	b.ID, b.Schema = approvals.NewID(), `{"type":"object","properties":{"name":{"type":"string","default":"latest"}},"required":["name"]}`
	if err := st.CreateApproval(ctx, b); err != nil {
		t.Fatal(err)
	}
	out := &sandboxtest.SyncBuffer{}
	go answerQuestions(ctx, st, "alice", "s-ask", true, out)
	if got := waitDecided(t, st, b.ID, out); got.State != store.ApprovalApproved || got.Response != `{"name":"latest"}` {
		t.Fatalf("--yes with defaults: %+v", got)
	}
}
