package local

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A pid namespace whose processes are gone hands its inode number (the name killPidNS
// matches) to the next namespace created on the host. The kill loops of Stop and exec
// teardown therefore pin the namespace while they run: a namespace created meanwhile,
// such as another sandbox's or a build's, never gets that name, and is never killed.
func TestPinnedPidNSNameIsNotReused(t *testing.T) {
	newNS := func() (*exec.Cmd, int) {
		t.Helper()
		cmd := exec.Command("unshare", "-Ur", "--pid", "--fork", "sleep", "600")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
		deadline := time.Now().Add(5 * time.Second)
		for sandboxPidNS(cmd.Process.Pid) == "" {
			if time.Now().After(deadline) {
				t.Fatal("unshare's child never appeared in a new pid namespace")
			}
			time.Sleep(2 * time.Millisecond)
		}
		return cmd, cmd.Process.Pid
	}
	freshNames := func(n int) []string {
		var out []string
		for range n {
			b, err := exec.Command("unshare", "-Ur", "--pid", "--fork", "readlink", "/proc/self/ns/pid").Output()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, strings.TrimSpace(string(b)))
		}
		return out
	}
	end := func(cmd *exec.Cmd) {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	}

	// Unpinned: the name is free once the namespace empties (how often the kernel hands
	// it out again at once is logged: it is what the pin guards against).
	cmd, pid := newNS()
	bare := sandboxPidNS(pid)
	end(cmd)
	time.Sleep(200 * time.Millisecond) // namespaces are freed after an RCU grace period
	reused := 0
	for _, n := range freshNames(5) {
		if n == bare {
			reused++
		}
	}
	t.Logf("unpinned: %s was given to %d of 5 namespaces created after it emptied", bare, reused)

	cmd, pid = newNS()
	name, pin := pinSandboxPidNS(pid)
	if name == "" || pin == nil {
		t.Fatal("pinSandboxPidNS found no namespace")
	}
	defer pin.Close()
	if name != sandboxPidNS(pid) {
		t.Fatalf("pinned %s, but the child's namespace is %s", name, sandboxPidNS(pid))
	}
	end(cmd)
	time.Sleep(200 * time.Millisecond)
	for _, n := range freshNames(5) {
		if n == name {
			t.Fatalf("a namespace created while %s was pinned got its name", name)
		}
	}
}
