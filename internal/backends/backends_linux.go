package backends

import "github.com/trueforge/terraform-provider-trueforge/internal/sandbox/local"

// addPlatformBackends adds the backends that run only on this OS: the local backend
// (bubblewrap, namespaces, cgroups) is Linux's.
func addPlatformBackends(r Registry) { r[local.Type] = local.NewBackend() }

// ReexecMain runs this process as the program a backend re-executed it as, and exits;
// in any other process it does nothing and returns. Only the local backend has such
// programs: it runs the binary that uses it again as a sandbox's or build's setup step
// (root in a new mount namespace), as the sandbox init (PID 1), the build shim and the
// unshift step (local.ReexecMain has the details).
//
// Every binary whose process may create local sandboxes or builds calls it first thing
// in main, before it parses flags or starts anything, and a test binary in TestMain:
// no backend package has an init function that would do it behind the binary's back.
func ReexecMain() { local.ReexecMain() }
