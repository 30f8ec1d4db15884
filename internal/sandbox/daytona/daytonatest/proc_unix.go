//go:build unix

package daytonatest

import (
	"os/exec"
	"syscall"
)

// killGroup makes cmd run in its own process group and be killed as a group on cancel, so a
// timeout also ends the shell's children.
func killGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
