package main

import "path/filepath"

// The harness is also the in-sandbox network helper (package netd), so a static
// harness (CGO_ENABLED=0) needs no second binary: the local runtime binds the helper at
// /run/trueforge/netd and starts it with no arguments (closing the descriptor named in
// sandbox.EgressReadyEnv once listening, as trueforge-netd does); -prepare is accepted
// as trueforge-netd takes it. netdArgs recognizes those invocations:
//
//   - started under the name netd or trueforge-netd (argv[0]): netd with the rest;
//   - `trueforge-harness netd [flags]`: the hidden subcommand;
//   - `trueforge-harness -prepare`: the namespace preparation, as trueforge-netd takes it.
//
// main then runs netd.Main on the rest, the entry point trueforge-netd runs too: one
// command, so both helpers make themselves not dumpable before anything else.
func netdArgs(argv []string) ([]string, bool) {
	if len(argv) == 0 {
		return nil, false
	}
	switch filepath.Base(argv[0]) {
	case "netd", "trueforge-netd":
		return argv[1:], true
	}
	if len(argv) > 1 {
		switch argv[1] {
		case "netd":
			return argv[2:], true
		case "-prepare", "--prepare":
			return argv[1:], true
		}
	}
	return nil, false
}
