package api

import (
	"net/http"
	"strconv"
	"time"
)

// Admin audit log: what admins did through the API (deleting another user's session)
// and the user changes made with `trueforge-harness users` (adding a user, rotating a
// token, removing one), newest first.

// auditJSON is one entry of the admin audit log.
type auditJSON struct {
	Seq    int64     `json:"seq"`
	At     time.Time `json:"at"`
	Actor  string    `json:"actor"`
	Action string    `json:"action"`
	Target string    `json:"target"`
	Detail string    `json:"detail"`
}

// Audit log paging: ?limit= entries (default and most), ?before=SEQ for older ones.
const (
	DefaultAuditLimit = 100
	MaxAuditLimit     = 1000
)

func (s *Server) auditLog(w http.ResponseWriter, r *http.Request, _ *caller) error {
	q := r.URL.Query()
	limit := DefaultAuditLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxAuditLimit {
			return errorf(http.StatusBadRequest, CodeBadRequest, "limit must be a number from 1 to %d, not %q", MaxAuditLimit, v)
		}
		limit = n
	}
	var before int64
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return errorf(http.StatusBadRequest, CodeBadRequest, "before must be an entry's seq (1 or more), not %q", v)
		}
		before = n
	}
	entries, err := s.cfg.Store.AuditLog(r.Context(), before, limit)
	if err != nil {
		return err
	}
	out := make([]auditJSON, 0, len(entries))
	for _, e := range entries {
		out = append(out, auditJSON{Seq: e.Seq, At: e.At.UTC(), Actor: e.Actor, Action: e.Action, Target: e.Target, Detail: e.Detail})
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": out})
	return nil
}
