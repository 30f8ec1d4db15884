package netd

import (
	"fmt"
	"syscall"
)

// prSetDumpable is PR_SET_DUMPABLE.
const prSetDumpable = 4

// NotDumpable makes the calling process not dumpable, which the kernel resets at every
// execve of an ordinary binary, so netd calls it first thing. In a sandbox netd runs as
// the same user as the commands but, unlike them, may create AF_UNIX sockets: a process
// that is not dumpable cannot be ptraced, and its /proc/<pid>/mem, environ, fd, syscall
// and the like are closed, to any process of that user without CAP_SYS_PTRACE, so that
// no command can write code into netd and act with what netd may do.
func NotDumpable() error {
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetDumpable, 0, 0, 0, 0, 0); e != 0 {
		return fmt.Errorf("netd: not dumpable: %w", e)
	}
	return nil
}
