package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// DefaultUsageWindow is the window usage reports when neither its start nor its length
// is given: the last seven days.
const DefaultUsageWindow = 7 * 24 * time.Hour

// WindowError is a usage window parameter that is not valid: Param names it ("since",
// "until" or "window"; the API's query parameter, the CLI's flag of that name) and
// Message says what is wrong and what to give instead.
type WindowError struct{ Param, Message string }

func (e *WindowError) Error() string { return e.Param + ": " + e.Message }

// UsageWindow is the window [from, to) that since, until and window (each "" when not
// given) select at now: until defaults to now, and the start is since, else until minus
// window, else until minus DefaultUsageWindow. Times are RFC 3339 or a date
// (YYYY-MM-DD, midnight UTC); a window is a Go duration (36h) or a number of days (7d).
// The window may be at most store.MaxUsageWindow long.
func UsageWindow(since, until, window string, now time.Time) (from, to time.Time, err error) {
	to = now
	if until != "" {
		if to, err = parseWhen(until); err != nil {
			return from, to, &WindowError{"until", err.Error()}
		}
	}
	switch {
	case since != "" && window != "":
		return from, to, &WindowError{"window", "give since or window, not both: window counts back from until"}
	case since != "":
		if from, err = parseWhen(since); err != nil {
			return from, to, &WindowError{"since", err.Error()}
		}
	default:
		d := DefaultUsageWindow
		if window != "" {
			if d, err = parseWindow(window); err != nil {
				return from, to, &WindowError{"window", err.Error()}
			}
		}
		from = to.Add(-d)
	}
	if err := store.CheckUsageWindow(from, to); err != nil {
		param := "since"
		if since == "" {
			param = "window"
		}
		return from, to, &WindowError{param, strings.TrimPrefix(err.Error(), store.ErrUsageWindow.Error()+": ") +
			fmt.Sprintf("; give a window of at most %dd that ends after it starts", int(store.MaxUsageWindow.Hours()/24))}
	}
	return from, to, nil
}

func parseWhen(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not a time: give RFC 3339 (2026-01-31T12:00:00Z) or a date (2026-01-31)", s)
}

func parseWindow(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		days, err = strconv.Atoi(n)
		d = time.Duration(days) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a length of time: give days (7d) or a duration (36h, 90m)", s)
	}
	return d, nil
}

// UsageReport is what GET /api/v1/usage and `trueforge-harness usage -o json` answer.
type UsageReport struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// User and Agent are the filters applied ("" none: every user's, or every agent's).
	User      string       `json:"user"`
	Agent     string       `json:"agent"`
	Tokens    []TokenRow   `json:"tokens"`
	Sandboxes []SandboxRow `json:"sandboxes"`
	MCP       []MCPRow     `json:"mcp"`
	Totals    UsageTotals  `json:"totals"`
}

// TokenRow is the tokens one agent spent for one user on one model.
type TokenRow struct {
	Agent        string `json:"agent"`
	User         string `json:"user"`
	Model        string `json:"model"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Steps        int64  `json:"steps"`
}

// SandboxRow is how long one agent's sandboxes ran for one user on one environment.
type SandboxRow struct {
	Agent       string `json:"agent"`
	User        string `json:"user"`
	Environment string `json:"environment"`
	Seconds     int64  `json:"sandbox_seconds"`
}

// MCPRow is the MCP calls one agent's Code Mode scripts made for one user to one server.
type MCPRow struct {
	Agent   string `json:"agent"`
	User    string `json:"user"`
	Server  string `json:"server"`
	Calls   int64  `json:"calls"`
	Errors  int64  `json:"errors"`
	Refused int64  `json:"refused"`
}

// UsageTotals sums a report's rows.
type UsageTotals struct {
	InputTokens    int64 `json:"input_tokens"`
	OutputTokens   int64 `json:"output_tokens"`
	SandboxSeconds int64 `json:"sandbox_seconds"`
	MCPCalls       int64 `json:"mcp_calls"`
}

// UsageOf is u as the API and the CLI show it (lists are never null).
func UsageOf(u store.Usage, f store.UsageFilter) UsageReport {
	r := UsageReport{From: u.From.UTC(), To: u.To.UTC(), User: f.User, Agent: f.Agent,
		Tokens: []TokenRow{}, Sandboxes: []SandboxRow{}, MCP: []MCPRow{}}
	for _, t := range u.Tokens {
		r.Tokens = append(r.Tokens, TokenRow{t.Agent, t.User, t.Model, t.InputTokens, t.OutputTokens, t.Steps})
		r.Totals.InputTokens += t.InputTokens
		r.Totals.OutputTokens += t.OutputTokens
	}
	for _, b := range u.Sandboxes {
		sec := int64(b.Running.Round(time.Second) / time.Second)
		r.Sandboxes = append(r.Sandboxes, SandboxRow{b.Agent, b.User, b.Environment, sec})
		r.Totals.SandboxSeconds += sec
	}
	for _, m := range u.MCP {
		r.MCP = append(r.MCP, MCPRow{m.Agent, m.User, m.Server, m.Calls, m.Errors, m.Refused})
		r.Totals.MCPCalls += m.Calls
	}
	return r
}

// usage answers what the caller's sessions spent over a window; an admin's covers
// every user (?user= narrows it). A user may narrow to one agent (?agent=), never ask
// for another user's.
func (s *Server) usage(w http.ResponseWriter, r *http.Request, c *caller) error {
	q := r.URL.Query()
	for name := range q {
		switch name {
		case "since", "until", "window", "user", "agent":
		default:
			return errorf(http.StatusBadRequest, CodeBadRequest, "query parameter %q is not one of usage's: since, until, window, user, agent", name)
		}
	}
	from, to, err := UsageWindow(q.Get("since"), q.Get("until"), q.Get("window"), s.cfg.Now())
	var we *WindowError
	if errors.As(err, &we) {
		return errorf(http.StatusBadRequest, CodeBadRequest, "query parameter %q: %s", we.Param, we.Message)
	}
	f := store.UsageFilter{From: from, To: to, User: c.user.Name, Agent: q.Get("agent")}
	if c.user.Admin {
		f.User = q.Get("user")
	} else if u := q.Get("user"); u != "" && u != c.user.Name {
		return errorf(http.StatusForbidden, CodeAdminOnly, "query parameter \"user\": only admins see another user's usage; leave it out to see your own")
	}
	u, err := s.cfg.Store.Usage(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, UsageOf(u, f))
	return nil
}
