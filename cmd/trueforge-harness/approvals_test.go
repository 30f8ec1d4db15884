package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/approvals"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/store/storetest"
)

// syncBuffer is an output the prompter and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// chat asks its user about a call of the session that waits for them, and the next line
// decides it: "n" and a note deny it with the note; an approval for another user's
// decision is not asked about.
func TestChatAsksForApprovals(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := storetest.Open(t, filepath.Join(t.TempDir(), "db.sqlite"))
	if err := st.CreateSession(ctx, store.Session{ID: "s-ask", Agent: "pr-bot", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
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
	out := &syncBuffer{}
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
