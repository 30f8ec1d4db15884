// Package nettest holds the network fixtures that tests of what crosses a network share
// (the egress proxy, the sandboxes' egress, the harness's package indexes): a server on
// loopback that counts the connections that reached it, for a host service nothing may
// reach, and a stand-in for a public TLS server with a CA of the test's own. It imports
// nothing of the project, so internal/egress's tests use it without depending on the
// sandbox packages (TestNoSandboxImport).
package nettest
