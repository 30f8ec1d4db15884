package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
)

// FindProgram is the absolute path of host program name: from PATH, else from the usual
// system directories, since a provider (or a test) may run with a minimal PATH. It is ""
// when the program is in none of them. The local runtime and the Daytona emulator's
// local box find the tools they run with it.
func FindProgram(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			return abs
		}
	}
	for _, dir := range []string{"/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"} {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && info.Mode().IsRegular() && info.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return ""
}
