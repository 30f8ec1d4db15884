package testpeer

import (
	"os"
	"testing"
)

// Peer names a peer a test helper starts, and how its binary is found.
type Peer struct {
	// Name is what the messages call it ("clamd", "jaeger").
	Name string
	// Env, when not "", names the variable that points at the binary: set, a binary
	// that is not there is a failure.
	Env string
	// RequireEnv is the variable that, at "1", makes a missing peer a failure (the test
	// suite sets it where it installed the peer: a skip there would hide a broken
	// install).
	RequireEnv string
	// HowTo says how to get the peer, for the skip message.
	HowTo string
}

// Missing fails or skips tb for a peer that could not be found (err says why): it
// fails when Env names a binary or RequireEnv is "1", and skips otherwise, saying how
// to get the peer.
func Missing(tb testing.TB, p Peer, err error) {
	tb.Helper()
	if p.Env != "" && os.Getenv(p.Env) != "" {
		tb.Fatalf("the %s named by %s: %v", p.Name, p.Env, err)
	}
	if os.Getenv(p.RequireEnv) == "1" {
		tb.Fatalf("%s is required (%s=1): %v", p.Name, p.RequireEnv, err)
	}
	tb.Skipf("skipping: no %s to test against (%v); %s; %s=1 makes this a failure", p.Name, err, p.HowTo, p.RequireEnv)
}
