package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sandboxnet"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
)

// The harness serves as netd exactly when started the ways the local runtime and an
// operator start the helper, and never takes a harness command for netd.
func TestNetdArgs(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want []string
		ok   bool
	}{
		{[]string{"/run/trueforge/netd"}, []string{}, true},
		{[]string{"/usr/local/bin/trueforge-netd", "-socket", "/x.sock"}, []string{"-socket", "/x.sock"}, true},
		{[]string{"trueforge-harness", "netd", "-ready", "/tmp/r"}, []string{"-ready", "/tmp/r"}, true},
		{[]string{"/opt/trueforge-harness", "-prepare"}, []string{"-prepare"}, true},
		{[]string{"trueforge-harness", "run", "netd", "hi"}, nil, false},
		{[]string{"trueforge-harness"}, nil, false},
		{nil, nil, false},
	} {
		got, ok := netdArgs(c.argv)
		if ok != c.ok || !slices.Equal(got, c.want) && len(got)+len(c.want) > 0 {
			t.Errorf("netdArgs(%q) = %q, %v; want %q, %v", c.argv, got, ok, c.want, c.ok)
		}
	}
	// netd.Main makes its caller not dumpable, so it runs in the static harness TestMain
	// built, not in this process.
	cmd := exec.Command(os.Getenv(sandboxnet.HelperEnv), "netd", "-no-such-flag")
	var ee *exec.ExitError
	if out, err := cmd.CombinedOutput(); !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Errorf("bad flag: %v; want exit status 2\n%s", err, out)
	}
}

// netdReaderUID is the user TestNetdNotDumpable runs netd and the reader as, when it
// runs as root: any uid without privileges will do (65534 is nobody).
const netdReaderUID = 65534

// TestNetdNotDumpable starts the netd entry point as the runtime does (the static
// harness under the name /run/trueforge/netd, and trueforge-netd, each with a ready
// descriptor) and, once it has signalled that it listens, checks from outside that a
// process of netd's own user without CAP_SYS_PTRACE cannot read its /proc/<pid>/environ:
// it is not dumpable, so a sandbox command cannot reach its memory either. A control
// process of the same user, dumpable, stays readable to the same reader.
func TestNetdNotDumpable(t *testing.T) {
	harness := os.Getenv(sandboxnet.HelperEnv) // built static by TestMain
	dir, err := os.MkdirTemp("", "tfh-nodump-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// The binaries must be readable by netd's user: execve of a file it cannot read makes
	// the process not dumpable by itself, which would hide a netd that forgot to.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	netdBin := filepath.Join(dir, "trueforge-netd")
	build := exec.Command("go", "build", "-trimpath", "-o", netdBin, "github.com/trueforge/terraform-provider-trueforge/cmd/trueforge-netd")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build trueforge-netd: %v\n%s", err, out)
	}
	harnessBin := filepath.Join(dir, "trueforge-harness")
	if err := copyFile(harness, harnessBin); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{harnessBin, netdBin} {
		if ok, err := sandboxnet.Static(name); err != nil || !ok {
			t.Fatalf("%s is not static: %v", name, err)
		}
	}

	flags := []string{"-socket", filepath.Join(dir, "egress.sock"), "-http", "127.0.0.1:0", "-socks", "127.0.0.1:0", "-dns", ""}
	for _, c := range []struct {
		name string
		path string
		argv []string
	}{
		{"harness-as-run-trueforge-netd", harnessBin, append([]string{sandbox.EgressHelperPath}, flags...)},
		{"harness-netd-subcommand", harnessBin, append([]string{"trueforge-harness", "netd"}, flags...)},
		{"trueforge-netd", netdBin, append([]string{"trueforge-netd"}, flags...)},
	} {
		t.Run(c.name, func(t *testing.T) {
			pid := startNetd(t, c.path, c.argv)
			control := exec.Command("sleep", "60")
			asReader(control)
			if err := control.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = control.Process.Kill(); _ = control.Wait() })

			if err := readEnviron(control.Process.Pid); err != nil {
				t.Fatalf("the reader cannot read even a dumpable process of its own user, so it proves nothing: %v", err)
			}
			err := readEnviron(pid)
			if err == nil {
				t.Fatalf("netd (pid %d, %q) is dumpable: a process of its user read its /proc/<pid>/environ", pid, c.argv[0])
			}
			if !strings.Contains(err.Error(), "ermission denied") {
				t.Fatalf("reading netd's environ: %v; want permission denied", err)
			}
		})
	}
}

// startNetd starts path with argv as netd's user (see asReader), with the ready
// descriptor the runtime passes, waits until netd closes it, and returns netd's pid; the
// cleanup stops netd with SIGTERM and wants it to exit 0.
func startNetd(t *testing.T, path string, argv []string) int {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var stderr bytes.Buffer
	cmd := &exec.Cmd{Path: path, Args: argv, Stderr: &stderr, ExtraFiles: []*os.File{w},
		Env: []string{"PATH=/usr/bin:/bin", sandbox.EgressReadyEnv + "=3"}}
	asReader(cmd)
	err = cmd.Start()
	w.Close()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("netd after SIGTERM: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited //nolint:errcheck // killed: the error says so
			t.Errorf("netd did not stop on SIGTERM\n%s", stderr.String())
		}
	})
	_ = r.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(r); err != nil {
		t.Fatalf("netd never signalled that it listens: %v", err)
	}
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("netd exited: %v\n%s", err, stderr.String())
	default:
	}
	return cmd.Process.Pid
}

// asReader makes cmd run as the reader's user: netdReaderUID when this test runs as
// root (a uid change drops every capability), else this process's own user.
func asReader(cmd *exec.Cmd) {
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: netdReaderUID, Gid: netdReaderUID, Groups: []uint32{}}}
	}
}

// readEnviron reads /proc/<pid>/environ as the reader's user: through cat as
// netdReaderUID when root, else directly.
func readEnviron(pid int) error {
	p := fmt.Sprintf("/proc/%d/environ", pid)
	if os.Geteuid() != 0 {
		_, err := os.ReadFile(p)
		return err
	}
	cmd := exec.Command("cat", p)
	asReader(cmd)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("cat %s as uid %d: %v: %s", p, netdReaderUID, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o755)
}
