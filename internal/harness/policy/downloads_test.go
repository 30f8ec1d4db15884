package policy

import (
	"strings"
	"testing"
)

// Without a policy file, and for the classifications a file leaves out, downloads keep
// their defaults: untrusted, internal and public go to the owner and the users the
// session is shared with, confidential to the owner only, restricted to nobody.
func TestDownloadDefaults(t *testing.T) {
	owner := Downloader{Name: "alice", Owner: true}
	shared := Downloader{Name: "bob", Shared: true}
	admin := Downloader{Name: "root", Admin: true}
	other := Downloader{Name: "eve"}
	withOther := load(t, `{"default": "allow", "downloads": {"internal": {"roles": ["any"]}}}`)
	for _, p := range []*Policy{nil, load(t, `{"default": "deny"}`), withOther} {
		for _, c := range []struct {
			class                       string
			owner, shared, admin, other bool
			says                        string
		}{
			{ClassUntrusted, true, true, false, false, "the session's owner and the users the session is shared with"},
			{ClassPublic, true, true, false, false, "the session's owner and the users the session is shared with"},
			{ClassConfidential, true, false, false, false, "the session's owner"},
			{ClassRestricted, false, false, false, false, "nobody without an admin's release"},
			{"top-secret", false, false, false, false, "nobody without an admin's release"},
		} {
			r := p.DownloadRecipients(c.class)
			for _, d := range []struct {
				who  Downloader
				want bool
			}{{owner, c.owner}, {shared, c.shared}, {admin, c.admin}, {other, c.other}} {
				if got, _ := r.Allows(d.who); got != d.want {
					t.Errorf("%v, %s, %+v: %v; want %v", p, c.class, d.who, got, d.want)
				}
			}
			if r.String() != c.says || (c.class != "top-secret") != r.Default {
				t.Errorf("%s: %q (default %v); want %q", c.class, r, r.Default, c.says)
			}
		}
	}
	if r := withOther.DownloadRecipients(ClassInternal); r.Default || r.String() != "anyone who may see the session" {
		t.Errorf("internal, as the file says: %+v %q", r, r)
	}
}

// What the file says replaces the default of that classification: roles, and users by
// name or pattern, with the part that let someone in named.
func TestDownloadRules(t *testing.T) {
	p := load(t, `{"default": "allow", "downloads": {
	  "confidential": {"users": ["auditor", "legal_*"], "roles": ["owner", "admin"]},
	  "restricted": {"roles": []},
	  "public": {"roles": ["any"]},
	  "internal": {"users": ["carol"]}
	}}`)
	for _, c := range []struct {
		class string
		who   Downloader
		ok    bool
		by    string
	}{
		{ClassConfidential, Downloader{Name: "alice", Owner: true}, true, "role owner"},
		{ClassConfidential, Downloader{Name: "root", Admin: true}, true, "role admin"},
		{ClassConfidential, Downloader{Name: "legal_kim"}, true, "user legal_*"},
		{ClassConfidential, Downloader{Name: "auditor"}, true, "user auditor"},
		{ClassConfidential, Downloader{Name: "bob", Shared: true}, false, ""},
		{ClassRestricted, Downloader{Name: "alice", Owner: true}, false, ""},
		{ClassRestricted, Downloader{Name: "root", Admin: true}, false, ""},
		{ClassPublic, Downloader{Name: "bob", Shared: true}, true, "role any"},
		{ClassPublic, Downloader{Name: "root", Admin: true}, true, "role any"},
		{ClassPublic, Downloader{Name: "eve"}, false, ""},
		{ClassInternal, Downloader{Name: "alice", Owner: true}, false, ""},
		{ClassInternal, Downloader{Name: "carol"}, true, "user carol"},
		{ClassUntrusted, Downloader{Name: "bob", Shared: true}, true, "role shared"},
	} {
		if ok, by := p.DownloadRecipients(c.class).Allows(c.who); ok != c.ok || by != c.by {
			t.Errorf("%s, %+v: %v %q; want %v %q", c.class, c.who, ok, by, c.ok, c.by)
		}
	}
	if s := p.DownloadRecipients(ClassConfidential).String(); s != "the session's owner, admins and users auditor, legal_*" {
		t.Errorf("confidential: %q", s)
	}
}

// Each mistake in "downloads" names the field and the fix.
func TestDownloadLoadErrors(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{`{"default": "allow", "downloads": ["confidential"]}`, `"downloads" must be an object of classifications to who may download them`},
		{`{"default": "allow", "downloads": {"secret": {"roles": ["owner"]}}}`, `downloads."secret" is not a classification (classifications: untrusted, internal, confidential, restricted, public)`},
		{`{"default": "allow", "downloads": {"confidental": {"roles": ["owner"]}}}`, `did you mean "confidential"?`},
		{`{"default": "allow", "downloads": {"confidential": "owner"}}`, `downloads.confidential must be an object of "users" and "roles"`},
		{`{"default": "allow", "downloads": {"confidential": {}}}`, `downloads.confidential is empty: say who may download`},
		{`{"default": "allow", "downloads": {"confidential": {"role": ["owner"]}}}`, `downloads.confidential."role" is not a field of a download rule; did you mean "roles"?`},
		{`{"default": "allow", "downloads": {"confidential": {"roles": "owner"}}}`, `downloads.confidential.roles must be a list of roles (owner, admin, shared, any)`},
		{`{"default": "allow", "downloads": {"confidential": {"roles": ["owner", "owners"]}}}`, `downloads.confidential.roles[1] "owners" is not a role; did you mean "owner"?`},
		{`{"default": "allow", "downloads": {"confidential": {"users": "carol"}}}`, `downloads.confidential.users must be a list of user names or patterns`},
		{`{"default": "allow", "downloads": {"confidential": {"users": ["[carol"]}}}`, `downloads.confidential.users[0] "[carol"`},
		{`{"default": "allow", "download": {}}`, `"download" is not a field of a policy file; did you mean "downloads"?`},
	} {
		_, err := Load(write(t, c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want it to say %q", c.file, err, c.want)
		}
	}
}
