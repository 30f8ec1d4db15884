package store

import (
	"context"
	"crypto/subtle"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// User is a person (or program) who talks to agents through the harness's HTTP API
// (package api). Its name is the owner of the sessions it starts, as the CLI's --owner
// (or, on PostgreSQL, the database role) is for the CLI's. The API token is never
// stored: TokenHash is the hex SHA-256 of it, and a 256-bit random token needs no salt
// or slow hash (nobody can guess one from its hash).
type User struct {
	Name           string
	Admin          bool
	TokenHash      string
	CreatedAt      time.Time
	TokenRotatedAt time.Time
}

// userName is what a user may be called: a role name's rules (roles.go), so that a user
// reads the same in an owner column, a sandbox label and SQL, and names the same person
// as a PostgreSQL role of that name would.
var userName = roleName

// CheckUserName refuses a name that is not a valid user name, saying what is.
func CheckUserName(name string) error {
	if !userName().MatchString(name) {
		return fmt.Errorf("user name %q: use lower-case letters, digits and _ (at most 63), starting with a letter or _", name)
	}
	return nil
}

// UserNamePattern is the rule CheckUserName applies, for documentation and errors.
func UserNamePattern() *regexp.Regexp { return userName() }

const userSelect = `SELECT name, admin, token_hash, created_at, token_rotated_at FROM users`

func scanUser(sc scanner) (User, error) {
	var u User
	var admin, created, rotated int64
	err := sc.Scan(&u.Name, &admin, &u.TokenHash, &created, &rotated)
	u.Admin = admin != 0
	u.CreatedAt, u.TokenRotatedAt = time.UnixMilli(created), time.UnixMilli(rotated)
	return u, err
}

// CreateUser stores a new user with the hash of its first token.
func (s *Store) CreateUser(ctx context.Context, name string, admin bool, tokenHash string) error {
	if err := CheckUserName(name); err != nil {
		return err
	}
	now := s.stamp()
	_, err := s.db.ExecContext(ctx, `INSERT INTO users(name, admin, token_hash, created_at, token_rotated_at) VALUES (?, ?, ?, ?, ?)`,
		name, b2i(admin), tokenHash, now, now)
	return inserted(err, nil, "user %q", name)
}

// GetUser reads one user.
func (s *Store) GetUser(ctx context.Context, name string) (User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, userSelect+` WHERE name = ?`, name))
	return found(u, forbidden(err), "reading", "user %q", name)
}

// UserByTokenHash is the user whose current token hashes to tokenHash; ErrNotFound for
// any other (a rotated token's hash is gone with the rotation). The row is found by its
// unique index, then the hashes are compared again in constant time, so that nothing
// about a stored hash leaks through how long a comparison takes.
func (s *Store) UserByTokenHash(ctx context.Context, tokenHash string) (User, error) {
	u, err := scanUser(s.db.QueryRowContext(ctx, userSelect+` WHERE token_hash = ?`, tokenHash))
	if errors.Is(err, sql.ErrNoRows) || (err == nil && subtle.ConstantTimeCompare([]byte(u.TokenHash), []byte(tokenHash)) != 1) {
		return User{}, fmt.Errorf("no user has this token: %w", ErrNotFound)
	}
	if err != nil {
		return User{}, fmt.Errorf("reading users: %w", forbidden(err))
	}
	return u, nil
}

// ListUsers lists every user by name.
func (s *Store) ListUsers(ctx context.Context) ([]User, error) {
	users, err := queryRows(ctx, s.db, scanUser, userSelect+` ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("listing users: %w", err)
	}
	return users, nil
}

// SetUserToken replaces a user's token hash: the old token stops working at once (every
// request looks its token up afresh), and so do the logins (cookie sessions) made with
// it, since a token is rotated when it may have leaked. It returns how many logins
// ended.
func (s *Store) SetUserToken(ctx context.Context, name, tokenHash string) (int64, error) {
	var ended int64
	err := s.inTx(ctx, func(tx *txn) error {
		res, err := tx.ExecContext(ctx, `UPDATE users SET token_hash = ?, token_rotated_at = ? WHERE name = ?`, tokenHash, s.stamp(), name)
		if err := changedOne(res, err, "rotating the token of", "user %q", name); err != nil {
			return err
		}
		res, err = tx.ExecContext(ctx, `DELETE FROM user_logins WHERE user_name = ?`, name)
		if err != nil {
			return fmt.Errorf("ending the logins of user %q: %w", name, err)
		}
		ended, _ = res.RowsAffected()
		return nil
	})
	return ended, err
}

// DeleteUser removes a user and ends its logins (the foreign key cascades). Its
// sessions stay, owned by its name, until they are deleted.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	return s.inTx(ctx, func(tx *txn) error {
		// Explicit, not only the cascade: a login must never outlive its user.
		if _, err := tx.ExecContext(ctx, `DELETE FROM user_logins WHERE user_name = ?`, name); err != nil {
			return fmt.Errorf("ending the logins of user %q: %w", name, err)
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM users WHERE name = ?`, name)
		return changedOne(res, err, "deleting", "user %q", name)
	})
}

// Login is a signed-in browser: the cookie's value is a random id, stored as its hash
// (IDHash) with its user and when it lapses.
type Login struct {
	IDHash     string
	User       string
	CreatedAt  time.Time
	ExpiresAt  time.Time
	LastSeenAt time.Time
}

// CreateLogin stores a login of user that lapses at expires.
func (s *Store) CreateLogin(ctx context.Context, idHash, user string, expires time.Time) error {
	now := s.stamp()
	_, err := s.db.ExecContext(ctx, `INSERT INTO user_logins(id_hash, user_name, created_at, expires_at, last_seen_at) VALUES (?, ?, ?, ?, ?)`,
		idHash, user, now, expires.UnixMilli(), now)
	return wrote(err, notFound("user %q", user), "storing a login of user %q", user)
}

// LoginUser is the user of the login whose id hashes to idHash, if it has not lapsed
// at now. The expiry slides: it moves to now+ttl, written at most once a minute (a page
// makes many requests, and each need not write).
func (s *Store) LoginUser(ctx context.Context, idHash string, now time.Time, ttl time.Duration) (User, Login, error) {
	var l Login
	var created, expires, seen int64
	var u User
	var admin, ucreated, rotated int64
	err := s.db.QueryRowContext(ctx, `SELECT l.id_hash, l.user_name, l.created_at, l.expires_at, l.last_seen_at,
		u.name, u.admin, u.token_hash, u.created_at, u.token_rotated_at
		FROM user_logins l JOIN users u ON u.name = l.user_name WHERE l.id_hash = ?`, idHash).
		Scan(&l.IDHash, &l.User, &created, &expires, &seen, &u.Name, &admin, &u.TokenHash, &ucreated, &rotated)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, Login{}, fmt.Errorf("login: %w", ErrNotFound)
	}
	if err != nil {
		return User{}, Login{}, fmt.Errorf("reading a login: %w", forbidden(err))
	}
	l.CreatedAt, l.ExpiresAt, l.LastSeenAt = time.UnixMilli(created), time.UnixMilli(expires), time.UnixMilli(seen)
	u.Admin = admin != 0
	u.CreatedAt, u.TokenRotatedAt = time.UnixMilli(ucreated), time.UnixMilli(rotated)
	if subtle.ConstantTimeCompare([]byte(l.IDHash), []byte(idHash)) != 1 || !now.Before(l.ExpiresAt) {
		return User{}, Login{}, fmt.Errorf("login: %w", ErrNotFound)
	}
	if now.Sub(l.LastSeenAt) >= time.Minute {
		l.LastSeenAt, l.ExpiresAt = now, now.Add(ttl)
		if _, err := s.db.ExecContext(ctx, `UPDATE user_logins SET last_seen_at = ?, expires_at = ? WHERE id_hash = ?`,
			now.UnixMilli(), l.ExpiresAt.UnixMilli(), idHash); err != nil {
			return User{}, Login{}, fmt.Errorf("extending a login: %w", err)
		}
	}
	return u, l, nil
}

// DeleteLogin ends one login (logout); a missing one is fine.
func (s *Store) DeleteLogin(ctx context.Context, idHash string) error {
	if _, err := s.db.ExecContext(ctx, `DELETE FROM user_logins WHERE id_hash = ?`, idHash); err != nil {
		return fmt.Errorf("ending a login: %w", err)
	}
	return nil
}

// PruneLogins deletes logins that lapsed before now, returning how many.
func (s *Store) PruneLogins(ctx context.Context, now time.Time) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM user_logins WHERE expires_at <= ?`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("pruning lapsed logins: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// CountLogins is how many logins user has (lapsed ones included until pruned).
func (s *Store) CountLogins(ctx context.Context, user string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM user_logins WHERE user_name = ?`, user).Scan(&n)
	return n, err
}

// AuditEntry is one admin action: who (Actor) did what (Action) to what (Target).
type AuditEntry struct {
	Seq    int64
	At     time.Time
	Actor  string
	Action string
	Target string
	Detail string
}

// Audit actions.
const (
	AuditUserAdd       = "user.add"
	AuditUserToken     = "user.token"
	AuditUserRemove    = "user.remove"
	AuditSessionDelete = "session.delete"
)

// AppendAudit adds an entry at the end of the admin audit log and returns its seq.
func (s *Store) AppendAudit(ctx context.Context, e AuditEntry) (int64, error) {
	var seq int64
	err := s.inTx(ctx, func(tx *txn) error {
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) + 1 FROM admin_audit`).Scan(&seq); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO admin_audit(seq, at, actor, action, target, detail) VALUES (?, ?, ?, ?, ?, ?)`,
			seq, s.stamp(), e.Actor, e.Action, e.Target, e.Detail)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("recording %s of %q in the audit log: %w", e.Action, e.Target, err)
	}
	return seq, nil
}

// AuditLog lists audit entries newest first: those with seq < before (0: from the
// newest), at most limit of them.
func (s *Store) AuditLog(ctx context.Context, before int64, limit int) ([]AuditEntry, error) {
	q, args := `SELECT seq, at, actor, action, target, detail FROM admin_audit`, []any{}
	if before > 0 {
		q, args = q+` WHERE seq < ?`, append(args, before)
	}
	entries, err := queryRows(ctx, s.db, func(sc scanner) (AuditEntry, error) {
		var e AuditEntry
		var at int64
		err := sc.Scan(&e.Seq, &at, &e.Actor, &e.Action, &e.Target, &e.Detail)
		e.At = time.UnixMilli(at)
		return e, err
	}, q+` ORDER BY seq DESC LIMIT ?`, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("reading the audit log: %w", err)
	}
	return entries, nil
}

// UserAndSession is UserByTokenHash and GetSession(sessionID) in one statement, for a
// request on one session made with a bearer token: the user is read afresh (a rotated
// token or a removed user is ErrNotFound, as with UserByTokenHash) and so is the session,
// whoever owns it (the caller checks the owner). found is false when no session has the
// id. Nothing is cached: both rows are as they are at this statement.
func (s *Store) UserAndSession(ctx context.Context, tokenHash, sessionID string) (u User, ss Session, found bool, err error) {
	var admin, created, rotated int64
	var id, agent, owner, env sql.NullString
	var replay, in, out, sCreated, sUpdated sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT u.name, u.admin, u.token_hash, u.created_at, u.token_rotated_at,
 s.id, s.agent, s.owner, s.replay, s.environment, s.input_tokens, s.output_tokens, s.created_at, s.updated_at
 FROM users u LEFT JOIN sessions s ON s.id = ? WHERE u.token_hash = ?`, sessionID, tokenHash).Scan(
		&u.Name, &admin, &u.TokenHash, &created, &rotated,
		&id, &agent, &owner, &replay, &env, &in, &out, &sCreated, &sUpdated)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && subtle.ConstantTimeCompare([]byte(u.TokenHash), []byte(tokenHash)) != 1) {
		return User{}, Session{}, false, fmt.Errorf("no user has this token: %w", ErrNotFound)
	}
	if err != nil {
		return User{}, Session{}, false, fmt.Errorf("reading users and sessions: %w", forbidden(err))
	}
	u.Admin = admin != 0
	u.CreatedAt, u.TokenRotatedAt = time.UnixMilli(created), time.UnixMilli(rotated)
	if !id.Valid {
		return u, Session{}, false, nil
	}
	ss = Session{ID: id.String, Agent: agent.String, Owner: owner.String, Replay: replay.Int64 != 0, Environment: env.String,
		InputTokens: in.Int64, OutputTokens: out.Int64, CreatedAt: time.UnixMilli(sCreated.Int64), UpdatedAt: time.UnixMilli(sUpdated.Int64)}
	return u, ss, true, nil
}
