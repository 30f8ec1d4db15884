// Package clamtest gives tests a real malware scanner: a throwaway ClamAV daemon, clamd
// (Debian's clamav-daemon), that Start runs as the test process's own child, listening
// on a unix socket in a temporary directory and on a free TCP port of 127.0.0.1, and
// stops when the test ends.
//
// ClamAV's real signature databases cannot be downloaded here (and freshclam is never
// run), so clamd loads a database of the tests' own, written at start: one body
// signature, Signature, that finds the EICAR test file (EICAR) anywhere in a stream, on
// its own or inside a larger file. clamd needs no main.cvd or daily.cvd: any database
// directory with at least one signature file will do; it names what our signature finds
// Reported, with the ".UNOFFICIAL" it appends to signatures that ClamAV did not sign.
//
// Without clamd the tests that need it are skipped, unless TRUEFORGE_REQUIRE_CLAMD=1
// (set by scripts/test.sh, whose scripts/deps.sh installs clamav-daemon), where they
// fail: in `make test` nothing is skipped.
package clamtest

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/testpeer"
)

// RequireEnv, set to 1, makes a missing clamd a failure instead of a skip.
const RequireEnv = "TRUEFORGE_REQUIRE_CLAMD"

// EICAR is the EICAR test file: 68 bytes that every malware scanner reports, and that
// are harmless. It is put together from two halves so that this source file is not
// itself reported by a scanner that looks for the string.
const EICAR = `X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-` + `ANTIVIRUS-TEST-FILE!$H+H*`

// Signature is the name of the test database's signature for EICAR.
const Signature = "Trueforge.Test.EICAR"

// Reported is how clamd names what Signature finds: clamd appends ".UNOFFICIAL" to the
// names of signatures from databases that ClamAV did not sign.
const Reported = Signature + ".UNOFFICIAL"

// DefaultStreamMaxLength is the StreamMaxLength of a clamd that Start starts: small, so
// that a test of the limit sends little.
const DefaultStreamMaxLength = 10 << 20

// readyTimeout bounds the wait for clamd to answer PING: it loads its databases first
// (about a tenth of a second for ours; minutes for ClamAV's real ones).
const readyTimeout = 30 * time.Second

// stopTimeout bounds the wait for clamd to exit after SIGTERM, before SIGKILL.
const stopTimeout = 10 * time.Second

// Options are the settings of a clamd that StartWith starts.
type Options struct {
	// StreamMaxLength is clamd's limit on an INSTREAM stream, in bytes; 0 is
	// DefaultStreamMaxLength.
	StreamMaxLength int64
}

// Clamd is a running clamd of a test's own.
type Clamd struct {
	// Socket is the path of clamd's unix socket (LocalSocket).
	Socket string
	// TCPAddr is the 127.0.0.1:PORT that clamd listens on (TCPAddr and TCPSocket).
	TCPAddr string
	// StreamMaxLength is clamd's limit on an INSTREAM stream, in bytes.
	StreamMaxLength int64
	// Started is how long clamd took from its start to its first PONG.
	Started time.Duration

	dir    string
	proc   *exec.Cmd
	exited chan struct{}
	out    *testpeer.Output
	once   sync.Once
}

// Start starts a clamd for tb with the default options; see StartWith.
func Start(tb testing.TB) *Clamd {
	tb.Helper()
	return StartWith(tb, Options{})
}

// StartWith starts a clamd for tb and returns once it answers PING. Each call is a clamd
// of its own; it is stopped, and its files removed, when tb ends. It skips tb when clamd
// is not installed, or fails it under TRUEFORGE_REQUIRE_CLAMD=1.
func StartWith(tb testing.TB, opts Options) *Clamd {
	tb.Helper()
	bin, err := find()
	if err != nil {
		testpeer.Missing(tb, testpeer.Peer{Name: "clamd", RequireEnv: RequireEnv,
			HowTo: "install Debian's clamav-daemon (scripts/deps.sh --tests does)"}, err)
	}
	if opts.StreamMaxLength == 0 {
		opts.StreamMaxLength = DefaultStreamMaxLength
	}
	// Not tb.TempDir: a unix socket's path has at most 107 bytes, and a test's name
	// can be long.
	dir, err := os.MkdirTemp("", "clamtest-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	c := &Clamd{Socket: filepath.Join(dir, "clamd.sock"), StreamMaxLength: opts.StreamMaxLength, dir: dir,
		exited: make(chan struct{}), out: &testpeer.Output{}}
	if err := writeDatabase(dir); err != nil {
		tb.Fatal(err)
	}
	port, err := freePort()
	if err != nil {
		tb.Fatal(err)
	}
	c.TCPAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	conf := filepath.Join(dir, "clamd.conf")
	if err := os.WriteFile(conf, []byte(config(dir, c.Socket, port, opts.StreamMaxLength)), 0o600); err != nil {
		tb.Fatal(err)
	}

	begin := time.Now()
	c.proc = exec.Command(bin, "--config-file="+conf)
	c.proc.Dir = dir
	c.proc.Stdout, c.proc.Stderr = c.out, c.out
	// clamd dies with the test binary even when that is killed: the parent-death signal
	// is tied to the thread that started the child, so that thread waits for the child
	// and only then exits.
	c.proc.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := c.proc.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = c.proc.Wait()
		close(c.exited)
	}()
	if err := <-started; err != nil {
		tb.Fatalf("starting %s: %v", bin, err)
	}
	tb.Cleanup(func() {
		c.Stop()
		if tb.Failed() {
			tb.Logf("clamd's output:\n%s", c.out.String())
		}
	})

	deadline := time.Now().Add(readyTimeout)
	for {
		err := ping(c.Socket)
		if err == nil {
			break
		}
		select {
		case <-c.exited:
			tb.Fatalf("clamd exited before it answered PING (%v); its output:\n%s", c.proc.ProcessState, c.out.String())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("clamd did not answer PING within %v (%v); its output:\n%s", readyTimeout, err, c.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.Started = time.Since(begin)
	// The TCP listener is set up with the unix socket's, before the first PONG: a dial
	// that fails here means another process took the port between freePort and clamd.
	if conn, err := net.DialTimeout("tcp", c.TCPAddr, 5*time.Second); err != nil {
		tb.Fatalf("clamd answers on its socket but not on %s: %v; its output:\n%s", c.TCPAddr, err, c.out.String())
	} else {
		conn.Close()
	}
	return c
}

// Stop stops clamd and waits for it to exit: for a test of a scanner that is down. The
// test's end stops it too; a second Stop does nothing.
func (c *Clamd) Stop() {
	c.once.Do(func() {
		select {
		case <-c.exited: // reaped: its pid may be another's by now
			return
		default:
		}
		_ = c.proc.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.exited:
		case <-time.After(stopTimeout):
			_ = c.proc.Process.Kill()
			<-c.exited
		}
	})
}

// Output is what clamd wrote to its stdout and stderr so far.
func (c *Clamd) Output() string { return c.out.String() }

// config is a clamd.conf for a throwaway clamd in dir. Foreground: clamd stays the test
// process's child. No User: clamd runs as whoever runs the tests (root included; it
// needs no account of its own). Logs go to stderr only, never to syslog.
func config(dir, socket string, port int, streamMax int64) string {
	return fmt.Sprintf(`Foreground yes
LogSyslog no
LogTime yes
DatabaseDirectory %[1]s
TemporaryDirectory %[1]s
LocalSocket %[2]s
TCPSocket %[3]d
TCPAddr 127.0.0.1
StreamMaxLength %[4]d
`, dir, socket, port, streamMax)
}

// writeDatabase writes the test signature database into dir: an extended signature
// (.ndb: name, target type 0 for any file, offset * for anywhere, the bytes in hex) that
// finds EICAR wherever it is in a stream.
func writeDatabase(dir string) error {
	ndb := fmt.Sprintf("%s:0:*:%s\n", Signature, hex.EncodeToString([]byte(EICAR)))
	if err := os.WriteFile(filepath.Join(dir, "trueforge-test.ndb"), []byte(ndb), 0o600); err != nil {
		return fmt.Errorf("writing the test signature database: %w", err)
	}
	return nil
}

// find returns clamd's path: on PATH or in /usr/sbin, where Debian puts it and which is
// not on an ordinary user's PATH.
func find() (string, error) {
	if p, err := exec.LookPath("clamd"); err == nil {
		return p, nil
	}
	for _, d := range []string{"/usr/sbin", "/usr/local/sbin"} {
		p := filepath.Join(d, "clamd")
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("clamd is neither on PATH nor in /usr/sbin")
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago. clamd takes a
// port number only, so the port is chosen here, and may in principle be taken in
// between (StartWith then fails and says so).
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port for clamd: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ping asks the clamd at socket for PONG, for StartWith's wait.
func ping(socket string) error {
	conn, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("zPING\x00")); err != nil {
		return err
	}
	buf := make([]byte, 16)
	var got []byte
	for {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if bytes.Equal(got, []byte("PONG\x00")) {
			return nil
		}
		if err != nil || len(got) >= 5 {
			return fmt.Errorf("clamd answered PING with %q (%v)", got, err)
		}
	}
}
