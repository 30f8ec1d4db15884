// Package scan asks a malware scanner for a verdict on a file: ClamAV's daemon, clamd
// (Debian's clamav-daemon), over its unix socket or TCP, with the INSTREAM command, so
// the file never has to be where clamd can read it.
//
// A verdict comes only from a scanner's answer: every failure is an error, never
// "clean". Errors that mean the scanner could not be asked or did not answer wrap
// ErrUnavailable, so that the caller can fail closed (or, if its operator chose so,
// open); a stream longer than the scanner takes wraps ErrTooLarge; an answer that is no
// verdict wraps ErrFailed.
//
// clamd itself answers "OK" for a file it skipped for its size: one over clamd.conf's
// MaxFileSize, 100M by default (so clamd 1.4.6 does; clamd.conf(5) says the same of
// MaxScanSize and MaxRecursion, inside archives). A clamd for downloads wants
// AlertExceedsMax yes, which reports such a file instead
// ("Heuristics.Limits.Exceeded.MaxFileSize FOUND"), and a StreamMaxLength no larger
// than MaxFileSize, which refuses it (ErrTooLarge).
package scan

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Verdict is a scanner's answer on one file.
type Verdict struct {
	// Clean is true when the scanner found nothing.
	Clean bool
	// Signature names what was found ("Win.Test.EICAR_HDB-1"; clamd appends
	// ".UNOFFICIAL" to signatures from databases that ClamAV did not sign); "" when clean.
	Signature string
	// Scanner is the scanner's version with its database's, as clamd's VERSION answers
	// ("ClamAV 1.4.6/27530/Tue Jan 13 09:25:45 2026"; without a database version when
	// clamd runs on unofficial databases only): what the verdict was reached with.
	Scanner string
	// At is when the scanner answered.
	At time.Time
}

// ErrUnavailable is wrapped by the errors of a scanner that could not be reached or did
// not answer in time: dial, read and write failures, a closed connection, Clamd.Timeout.
var ErrUnavailable = errors.New("malware scanner unavailable")

// ErrTooLarge is wrapped by the error of a stream longer than the scanner takes (clamd's
// StreamMaxLength): such a file has no verdict.
var ErrTooLarge = errors.New("file too large for the malware scanner")

// ErrFailed is wrapped by the error of a scanner that answered with no verdict: clamd's
// ERROR answers (it could not scan the stream) and answers this package cannot read.
var ErrFailed = errors.New("malware scan failed")

// DefaultTimeout bounds one call when Clamd.Timeout is 0: from the dial to the answer,
// so it covers sending the file and scanning it.
const DefaultTimeout = 2 * time.Minute

// DefaultMaxStream is clamd's StreamMaxLength when clamd.conf does not set it (100M,
// clamd.conf(5)), used when Clamd.MaxStream is 0.
const DefaultMaxStream = 100 << 20

// chunkSize is the size of INSTREAM's largest chunk (a read of the file, which may be
// shorter): large enough that the 4-byte length prefixes cost nothing.
const chunkSize = 64 << 10

// maxReply caps what is read of one answer of clamd's: its answers are a line (VERSION's
// is the longest, about 50 bytes).
const maxReply = 4 << 10

// Clamd is a client of ClamAV's daemon. Its zero value is not usable: Network and
// Address must name the daemon's socket (Parse makes a Clamd from the operator's
// setting). It holds no connection, so one Clamd can be used by any number of
// goroutines; each call opens a connection of its own.
type Clamd struct {
	// Network is "unix" or "tcp".
	Network string
	// Address is the socket's path for "unix" (clamd.conf's LocalSocket; Debian's is
	// /run/clamav/clamd.ctl), host:port for "tcp" (TCPAddr and TCPSocket; 3310 by
	// convention).
	Address string
	// Timeout bounds each call from the dial to the answer; 0 is DefaultTimeout. The
	// context's deadline, when earlier, bounds it too. A call that runs out of Timeout
	// fails with ErrUnavailable: a scanner that does not answer is as good as down.
	Timeout time.Duration
	// MaxStream is the daemon's StreamMaxLength in bytes; 0 is clamd's default,
	// DefaultMaxStream, and a negative value means unknown. Scan sends no more than
	// MaxStream bytes: it fails with ErrTooLarge as soon as the file turns out longer,
	// without waiting for clamd's refusal, which over TCP can be lost to the connection's
	// reset. With a MaxStream above the daemon's, or unknown, clamd's refusal decides;
	// when it is lost, the error is ErrUnavailable.
	MaxStream int64
}

// Parse reads the operator's setting of a scanner: "unix:PATH" (an absolute path) or
// "tcp:HOST:PORT". Timeout and MaxStream are left at 0, their defaults.
func Parse(s string) (Clamd, error) {
	const want = `want "unix:/run/clamav/clamd.ctl" (clamd's LocalSocket) or "tcp:127.0.0.1:3310" (its TCPAddr and TCPSocket)`
	network, address, ok := strings.Cut(s, ":")
	if !ok {
		if strings.HasPrefix(s, "/") {
			return Clamd{}, fmt.Errorf("scanner %q: a socket's path needs the prefix unix: (unix:%s)", s, s)
		}
		return Clamd{}, fmt.Errorf("scanner %q: %s", s, want)
	}
	switch network {
	case "unix":
		if !strings.HasPrefix(address, "/") {
			return Clamd{}, fmt.Errorf("scanner %q: the socket's path must be absolute, as clamd.conf's LocalSocket is (unix:/run/clamav/clamd.ctl)", s)
		}
	case "tcp":
		host, port, err := net.SplitHostPort(address)
		if err != nil {
			return Clamd{}, fmt.Errorf("scanner %q: want tcp:HOST:PORT, such as tcp:127.0.0.1:3310 (an IPv6 host in brackets: tcp:[::1]:3310): %w", s, err)
		}
		if host == "" {
			return Clamd{}, fmt.Errorf("scanner %q: no host; name clamd's TCPAddr, such as tcp:127.0.0.1:%s", s, port)
		}
		if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
			return Clamd{}, fmt.Errorf("scanner %q: port %q is not a port number; clamd's TCPSocket is one, 3310 by convention", s, port)
		}
	default:
		return Clamd{}, fmt.Errorf("scanner %q: unknown kind %q; %s", s, network, want)
	}
	return Clamd{Network: network, Address: address}, nil
}

// String is the scanner as Parse reads it.
func (c *Clamd) String() string { return c.Network + ":" + c.Address }

// Ping checks that clamd answers.
func (c *Clamd) Ping(ctx context.Context) error {
	reply, err := c.command(ctx, "PING")
	if err != nil {
		return err
	}
	if reply != "PONG" {
		return fmt.Errorf("clamd %s answered PING with %q: %w", c, reply, ErrFailed)
	}
	return nil
}

// Version returns clamd's version with its database's ("ClamAV 1.4.6/27530/Tue Jan 13
// 09:25:45 2026").
func (c *Clamd) Version(ctx context.Context) (string, error) {
	reply, err := c.command(ctx, "VERSION")
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(reply, "ClamAV ") {
		return "", fmt.Errorf("clamd %s answered VERSION with %q: %w", c, reply, ErrFailed)
	}
	return reply, nil
}

// Scan sends what r reads to clamd and returns its verdict. A read error of r ends the
// scan with that error (the connection is dropped, so clamd scans nothing). The
// scanner's version is asked for first, on a connection of its own, so that the verdict
// names the database it was reached with.
func (c *Clamd) Scan(ctx context.Context, r io.Reader) (Verdict, error) {
	version, err := c.Version(ctx)
	if err != nil {
		return Verdict{}, err
	}
	conn, stop, err := c.dial(ctx)
	if err != nil {
		return Verdict{}, err
	}
	defer stop()
	fail := func(op string, err error) (Verdict, error) { return Verdict{}, c.ioError(ctx, op, err) }

	if _, err := conn.Write([]byte("zINSTREAM\x00")); err != nil {
		return fail("sending INSTREAM", err)
	}
	limit := c.MaxStream
	if limit == 0 {
		limit = DefaultMaxStream
	}
	buf := make([]byte, 4+chunkSize)
	var sent int64
	for {
		// Each read is a chunk of its own, sent at once: a slow reader cannot hold a
		// chunk back past the connection's deadline.
		n, rerr := r.Read(buf[4:])
		if rerr != nil && rerr != io.EOF {
			return Verdict{}, fmt.Errorf("reading the file to scan: %w", rerr)
		}
		if err := ctx.Err(); err != nil {
			return Verdict{}, fmt.Errorf("clamd %s: sending the file: %w", c, err)
		}
		if n == 0 {
			if rerr == io.EOF {
				break
			}
			continue
		}
		if limit > 0 && sent+int64(n) > limit {
			return Verdict{}, fmt.Errorf("the file is over %d bytes, clamd %s's StreamMaxLength: %w", limit, c, ErrTooLarge)
		}
		binary.BigEndian.PutUint32(buf[:4], uint32(n))
		if _, err := conn.Write(buf[:4+n]); err != nil {
			// clamd answers a stream over its StreamMaxLength, then closes the
			// connection: its answer is the reason the write failed, when it came.
			if reply, rerr := readReply(conn); rerr == nil {
				return c.verdict(reply, version)
			}
			return fail("sending the file", err)
		}
		sent += int64(n)
		if rerr != nil {
			break
		}
	}
	if _, err := conn.Write([]byte{0, 0, 0, 0}); err != nil {
		if reply, rerr := readReply(conn); rerr == nil {
			return c.verdict(reply, version)
		}
		return fail("ending the stream", err)
	}
	reply, err := readReply(conn)
	if err != nil {
		return fail("reading the verdict", err)
	}
	return c.verdict(reply, version)
}

// verdict is the Verdict that clamd's answer to INSTREAM gives, or its error.
func (c *Clamd) verdict(reply, version string) (Verdict, error) {
	clean, signature, err := ParseReply(reply)
	if err != nil {
		return Verdict{}, fmt.Errorf("clamd %s: %w", c, err)
	}
	return Verdict{Clean: clean, Signature: signature, Scanner: version, At: time.Now()}, nil
}

// ParseReply reads clamd's answer to INSTREAM (without its terminator): "stream: OK" is
// clean, "stream: SIGNATURE FOUND" is not. "INSTREAM size limit exceeded. ERROR" is an
// error wrapping ErrTooLarge; any other answer, such as "stream: REASON ERROR", one
// wrapping ErrFailed.
func ParseReply(reply string) (clean bool, signature string, err error) {
	if rest, ok := strings.CutPrefix(reply, "stream: "); ok {
		if rest == "OK" {
			return true, "", nil
		}
		if sig, ok := strings.CutSuffix(rest, " FOUND"); ok && sig != "" {
			return false, sig, nil
		}
	}
	if strings.HasPrefix(reply, "INSTREAM size limit exceeded") {
		return false, "", fmt.Errorf("%s (StreamMaxLength): %w", reply, ErrTooLarge)
	}
	if strings.HasSuffix(reply, " ERROR") {
		return false, "", fmt.Errorf("%s: %w", reply, ErrFailed)
	}
	return false, "", fmt.Errorf("unexpected answer %q: %w", reply, ErrFailed)
}

// command sends a z-prefixed command without data and returns clamd's one-line answer.
func (c *Clamd) command(ctx context.Context, cmd string) (string, error) {
	conn, stop, err := c.dial(ctx)
	if err != nil {
		return "", err
	}
	defer stop()
	if _, err := conn.Write([]byte("z" + cmd + "\x00")); err != nil {
		return "", c.ioError(ctx, "sending "+cmd, err)
	}
	reply, err := readReply(conn)
	if err != nil {
		return "", c.ioError(ctx, "reading the answer to "+cmd, err)
	}
	return reply, nil
}

// dial connects to clamd with the call's deadline set on the connection, and ends the
// connection when ctx ends: stop closes it and releases the watch on ctx.
func (c *Clamd) dial(ctx context.Context) (net.Conn, func(), error) {
	if c.Network != "unix" && c.Network != "tcp" {
		return nil, nil, fmt.Errorf("clamd %s: network %q is neither unix nor tcp: %w", c, c.Network, ErrUnavailable)
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	d := net.Dialer{Deadline: deadline}
	conn, err := d.DialContext(ctx, c.Network, c.Address)
	if err != nil {
		return nil, nil, c.ioError(ctx, "connecting", err)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, nil, c.ioError(ctx, "connecting", err)
	}
	// A deadline in the past wakes every blocked read and write at once; the
	// connection is closed by stop, after them.
	release := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	return conn, func() { release(); conn.Close() }, nil
}

// ioError is the error of a failed dial, read or write: ctx's own error when ctx ended
// (the caller gave up, the scanner is not to blame), else one wrapping ErrUnavailable.
func (c *Clamd) ioError(ctx context.Context, op string, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return fmt.Errorf("clamd %s: %s: %w", c, op, ctxErr)
	}
	return fmt.Errorf("clamd %s: %s: %w: %w", c, op, ErrUnavailable, err)
}

// readReply reads one answer of clamd's to a z-prefixed command: up to its NUL.
func readReply(conn net.Conn) (string, error) {
	var reply []byte
	buf := make([]byte, 512)
	for {
		n, err := conn.Read(buf)
		reply = append(reply, buf[:n]...)
		if i := bytes.IndexByte(reply, 0); i >= 0 {
			return string(reply[:i]), nil
		}
		if len(reply) > maxReply {
			return "", fmt.Errorf("an answer of over %d bytes without its terminator", maxReply)
		}
		if err == io.EOF {
			if len(reply) == 0 {
				return "", errors.New("connection closed without an answer")
			}
			return "", fmt.Errorf("connection closed in the answer %q", reply)
		}
		if err != nil {
			return "", err
		}
	}
}
