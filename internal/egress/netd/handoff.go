package netd

import (
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/trueforge/terraform-provider-trueforge/internal/egress"
)

// handOff sends a CONNECT together with the client's socket (SCM_RIGHTS): the harness
// answers and relays on the socket itself, so data crosses one hop instead of two.
// netd keeps the unix connection open until the harness closes it, then lets go.
func (s *Server) handOff(c *net.TCPConn, host, port string) error {
	f, err := c.File() // a duplicate; the original is closed below
	if err != nil {
		return fmt.Errorf("client socket: %w", err)
	}
	defer f.Close()
	up, err := net.Dial("unix", s.cfg.Socket)
	if err != nil {
		return fmt.Errorf("egress socket: %w", err)
	}
	defer up.Close()
	hp := net.JoinHostPort(host, port)
	hdr := fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n%s: 1\r\n\r\n", hp, hp, egress.ClientFDHeader)
	if _, _, err := up.(*net.UnixConn).WriteMsgUnix([]byte(hdr), syscall.UnixRights(int(f.Fd())), nil); err != nil {
		return fmt.Errorf("egress socket: %w", err)
	}
	f.Close()
	c.Close()
	_, _ = io.Copy(io.Discard, up)
	return nil
}
