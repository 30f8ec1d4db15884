package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Downloads: who may download an offered file is decided by its classification, which
// the agent gives it when it offers the file (offer_artifact). The operator's policy
// maps each classification to the users and the roles that may download it:
//
//	"downloads": {
//	  "confidential": {"users": ["auditor"], "roles": ["owner", "admin"]},
//	  "internal": {"roles": ["any"]}
//	}
//
// A classification the file leaves out keeps its default: untrusted, internal and
// public go to the session's owner and the users it is shared with (what every download
// was before classifications decided anything), confidential to the session's owner
// only, and restricted to nobody until an admin releases the file (a release names a
// user, or everyone who may see the session). The classification is the agent's word,
// so these defaults only ever narrow what the session's owner could download before.

// The classifications an offered file may carry, as offer_artifact lists them.
const (
	ClassUntrusted    = "untrusted"
	ClassInternal     = "internal"
	ClassConfidential = "confidential"
	ClassRestricted   = "restricted"
	ClassPublic       = "public"
)

// Classifications is every classification, in the order offer_artifact lists them.
var Classifications = []string{ClassUntrusted, ClassInternal, ClassConfidential, ClassRestricted, ClassPublic}

// The roles a download rule may name.
const (
	RoleOwner  = "owner"  // the session's owner
	RoleAdmin  = "admin"  // the harness's admins (store.User.Admin)
	RoleShared = "shared" // the users the session is shared with
	RoleAny    = "any"    // anyone who may see the session: its owner, the users it is shared with, admins
)

var (
	downloadRoles  = []string{RoleOwner, RoleAdmin, RoleShared, RoleAny}
	downloadFields = []string{"users", "roles"}
)

// Recipients is who may download the files of one classification: users by name
// (patterns, as a rule's users), and roles.
type Recipients struct {
	Users []string // the patterns as the file writes them
	Roles []string
	// Default: the file does not say; the harness's default for the classification.
	Default bool
	users   patterns
}

// defaultRecipients is who may download each classification when the policy does not
// say (and when there is no policy file).
var defaultRecipients = map[string]Recipients{
	ClassUntrusted:    {Roles: []string{RoleOwner, RoleShared}, Default: true},
	ClassInternal:     {Roles: []string{RoleOwner, RoleShared}, Default: true},
	ClassPublic:       {Roles: []string{RoleOwner, RoleShared}, Default: true},
	ClassConfidential: {Roles: []string{RoleOwner}, Default: true},
	ClassRestricted:   {Default: true},
}

// Downloader is who asks for a download, as a download rule sees them.
type Downloader struct {
	Name   string
	Owner  bool // the session's owner
	Admin  bool // a harness admin
	Shared bool // a user the session is shared with
}

// SeesSession reports whether d may see the session at all: the "any" role, and a
// release to everyone.
func (d Downloader) SeesSession() bool { return d.Owner || d.Admin || d.Shared }

// DownloadRecipients is who may download files classified c: the policy's
// "downloads" entry, else the default. A nil Policy has the defaults. A classification
// no offer can carry (a row written by hand) goes to nobody.
func (p *Policy) DownloadRecipients(c string) Recipients {
	if p != nil {
		if r, ok := p.downloads[c]; ok {
			return r
		}
	}
	if r, ok := defaultRecipients[c]; ok {
		return r
	}
	return Recipients{}
}

// Allows reports whether d may download under r, and what in r let them ("role owner",
// "user carol"); "" when nothing did.
func (r Recipients) Allows(d Downloader) (bool, string) {
	for _, role := range r.Roles {
		if (role == RoleOwner && d.Owner) || (role == RoleAdmin && d.Admin) || (role == RoleShared && d.Shared) ||
			(role == RoleAny && d.SeesSession()) {
			return true, "role " + role
		}
	}
	for i, re := range r.users {
		if re.MatchString(d.Name) {
			return true, "user " + r.Users[i]
		}
	}
	return false, ""
}

// Nobody reports whether r lets no one download: only a release does.
func (r Recipients) Nobody() bool { return len(r.Roles) == 0 && len(r.Users) == 0 }

// String says who r lets download, for messages: "the session's owner and the users it
// is shared with", "nobody without an admin's release".
func (r Recipients) String() string {
	if r.Nobody() {
		return "nobody without an admin's release"
	}
	var who []string
	for _, role := range r.Roles {
		switch role {
		case RoleOwner:
			who = append(who, "the session's owner")
		case RoleAdmin:
			who = append(who, "admins")
		case RoleShared:
			who = append(who, "the users the session is shared with")
		case RoleAny:
			who = append(who, "anyone who may see the session")
		}
	}
	if len(r.Users) > 0 {
		who = append(who, "users "+strings.Join(r.Users, ", "))
	}
	if len(who) == 1 {
		return who[0]
	}
	return strings.Join(who[:len(who)-1], ", ") + " and " + who[len(who)-1]
}

// parseDownloads reads "downloads": an object of classifications to Recipients.
func parseDownloads(raw json.RawMessage) (map[string]Recipients, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf(`"downloads" must be an object of classifications to who may download them, like "downloads": {"confidential": {"roles": ["owner", "admin"]}}, not %s`,
			clip(string(bytes.TrimSpace(raw))))
	}
	for _, c := range sortedKeys(fields) {
		if slices.Contains(Classifications, c) {
			continue
		}
		msg := fmt.Sprintf("downloads.%q is not a classification", c)
		if s := closest(c, Classifications); s != "" {
			msg += fmt.Sprintf("; did you mean %q?", s)
		}
		return nil, fmt.Errorf("%s (classifications: %s)", msg, strings.Join(Classifications, ", "))
	}
	out := map[string]Recipients{}
	for _, c := range Classifications {
		raw, ok := fields[c]
		if !ok {
			continue
		}
		r, err := parseRecipients(raw, "downloads."+c)
		if err != nil {
			return nil, err
		}
		out[c] = r
	}
	return out, nil
}

func sortedKeys(m map[string]json.RawMessage) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// parseRecipients reads one classification's {"users": [...], "roles": [...]}. An empty
// object is refused (it reads as "the default" as easily as "nobody"); nobody is said
// with an empty list.
func parseRecipients(raw json.RawMessage, at string) (Recipients, error) {
	var r Recipients
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return r, fmt.Errorf(`%s must be an object of "users" and "roles", like {"users": ["auditor"], "roles": ["owner", "admin"]}, not %s`, at, clip(string(bytes.TrimSpace(raw))))
	}
	if err := knownFields(fields, downloadFields, at+".", "a download rule"); err != nil {
		return r, err
	}
	if len(fields) == 0 {
		return r, fmt.Errorf(`%s is empty: say who may download, like {"roles": ["owner"]}; {"roles": []} lets nobody but an admin's release; leave the classification out for its default`, at)
	}
	if raw, ok := fields["roles"]; ok {
		if err := json.Unmarshal(raw, &r.Roles); err != nil || r.Roles == nil {
			return r, fmt.Errorf(`%s.roles must be a list of roles (%s), like ["owner", "admin"], not %s`, at, strings.Join(downloadRoles, ", "), clip(string(bytes.TrimSpace(raw))))
		}
		for i, role := range r.Roles {
			if slices.Contains(downloadRoles, role) {
				continue
			}
			msg := fmt.Sprintf("%s.roles[%d] %q is not a role", at, i, role)
			if s := closest(role, downloadRoles); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			return r, fmt.Errorf(`%s (roles: owner: the session's owner; admin: the harness's admins; shared: the users the session is shared with; any: anyone who may see the session)`, msg)
		}
	}
	if raw, ok := fields["users"]; ok {
		if err := json.Unmarshal(raw, &r.Users); err != nil || r.Users == nil {
			return r, fmt.Errorf(`%s.users must be a list of user names or patterns, like ["auditor", "legal_*"], not %s`, at, clip(string(bytes.TrimSpace(raw))))
		}
		if len(r.Users) > 0 {
			var err error
			if r.users, err = patternList(raw, at+".users"); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}
