package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A policy file that cannot be read as rules stops a run before the agent starts, and
// the error names the flag, the file, the rule and the field; a command that runs no
// agent is not stopped by it.
func TestRunRefusesABrokenPolicy(t *testing.T) {
	st := seed(t)
	bad := filepath.Join(t.TempDir(), "policy.json")
	if err := os.WriteFile(bad, []byte(`{"rules": [{"effect": "deny", "tool": ["x__*"]}], "default": "allow"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, err := run(t, st.Path(), "", "--policy", bad, "run", "talker", "hi")
	if err == nil {
		t.Fatalf("a broken policy let the run go on:\n%s", out)
	}
	for _, want := range []string{"--policy", bad, "rules[0]", "tool"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error %q does not name %q", err, want)
		}
	}
	if strings.Contains(out, "Hello there") {
		t.Fatalf("the agent answered despite the broken policy:\n%s", out)
	}
	if _, _, err := run(t, st.Path(), "", "--policy", bad, "sessions", "list"); err != nil {
		t.Fatalf("sessions list with a broken policy file: %v", err)
	}
}
