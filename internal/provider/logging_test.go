package provider

import "testing"

// A database URL reaches the provider's log without its password, in the user info or
// in the query.
func TestRedactedURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                                     "(default SQLite path)",
		"/var/lib/trueforge/trueforge.db":      "/var/lib/trueforge/trueforge.db",
		"sqlite:///tmp/cp.db":                  "sqlite:///tmp/cp.db",
		"postgres://team:s3cret@db.example/tf": "postgres://team:xxxxx@db.example/tf",
		"postgres://team@db.example/tf?password=s3cret&sslmode=require": "postgres://team@db.example/tf?password=xxxxx&sslmode=require",
	} {
		if got := redactedURL(in); got != want {
			t.Errorf("redactedURL(%q) = %q, want %q", in, got, want)
		}
	}
}
