package clamtest

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStartStop starts a clamd, finds it answering on both sockets, and stops it: the
// process is gone and nothing answers any more.
func TestStartStop(t *testing.T) {
	c := Start(t)
	t.Logf("clamd answered PING %v after its start", c.Started)
	if err := ping(c.Socket); err != nil {
		t.Fatalf("PING on %s: %v", c.Socket, err)
	}
	conn, err := net.DialTimeout("tcp", c.TCPAddr, 5*time.Second)
	if err != nil {
		t.Fatalf("dialing %s: %v", c.TCPAddr, err)
	}
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("nPING\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := conn.Read(buf); err != nil || string(buf) != "PONG\n" {
		t.Fatalf("PING on %s: %q, %v", c.TCPAddr, buf, err)
	}
	conn.Close()
	if c.StreamMaxLength != DefaultStreamMaxLength {
		t.Errorf("StreamMaxLength %d, want %d", c.StreamMaxLength, DefaultStreamMaxLength)
	}

	pid := c.proc.Process.Pid
	begin := time.Now()
	c.Stop()
	t.Logf("clamd exited %v after SIGTERM", time.Since(begin))
	select {
	case <-c.exited:
	default:
		t.Fatal("Stop returned before clamd exited")
	}
	// Reaped: the pid names no process (or, rarely, a newer one that is no clamd).
	if err := syscall.Kill(pid, 0); err == nil {
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); exe != "" && exe == c.proc.Path {
			t.Errorf("clamd (pid %d) still runs after Stop", pid)
		}
	} else if !errors.Is(err, syscall.ESRCH) {
		t.Errorf("kill -0 %d: %v", pid, err)
	}
	if err := ping(c.Socket); err == nil {
		t.Error("PING answered on the unix socket after Stop")
	}
	if conn, err := net.DialTimeout("tcp", c.TCPAddr, time.Second); err == nil {
		conn.Close()
		t.Errorf("%s accepts connections after Stop", c.TCPAddr)
	}
	c.Stop() // a second Stop, and the cleanup's, do nothing
}

// TestStreamMaxLength: the option reaches clamd.conf.
func TestStreamMaxLength(t *testing.T) {
	c := StartWith(t, Options{StreamMaxLength: 1 << 20})
	if c.StreamMaxLength != 1<<20 {
		t.Fatalf("StreamMaxLength %d, want %d", c.StreamMaxLength, 1<<20)
	}
	conf, err := os.ReadFile(c.dir + "/clamd.conf")
	if err != nil {
		t.Fatal(err)
	}
	if want := "StreamMaxLength 1048576\n"; !strings.Contains("\n"+string(conf), "\n"+want) {
		t.Errorf("clamd.conf has no %q:\n%s", want, conf)
	}
}
