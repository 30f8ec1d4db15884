package local

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
)

const buildsSupported = true

// detach makes cmd a session (and process group) leader without a controlling terminal,
// so that signals to the caller's group or terminal never reach the build.
func detach(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
}

// killGroup SIGKILLs the process group led by pid. A group that is already gone is fine.
func killGroup(pid int) error {
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill process group %d: %w", pid, err)
	}
	return nil
}

// procStat returns a process's state letter and start time (clock ticks since boot)
// from /proc/<pid>/stat.
func procStat(pid int) (state byte, start uint64, err error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may contain anything, so fields
	// are counted from the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64) // field 22, starttime
	if err != nil {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat: %w", pid, err)
	}
	return f[0][0], start, nil
}

func processStartTime(pid int) (uint64, error) {
	_, start, err := procStat(pid)
	return start, err
}

// processAlive reports whether pid is still the process that started at start and has
// not exited (a zombie has).
func processAlive(pid int, start uint64) bool {
	state, s, err := procStat(pid)
	return err == nil && s == start && state != 'Z' && state != 'X'
}
