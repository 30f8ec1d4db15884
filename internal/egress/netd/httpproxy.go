package netd

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// serveHTTP handles one client of the HTTP proxy: the first request decides the
// connection (a CONNECT tunnel, or plain http:// relayed to the harness); the harness's
// answers, refusals included, reach the client unchanged.
func (s *Server) serveHTTP(c net.Conn) {
	br := bufio.NewReader(c)
	_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
	req, err := http.ReadRequest(br)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		c.Close()
		return
	}
	if req.Method == http.MethodConnect {
		host, port, err := net.SplitHostPort(req.Host)
		if err != nil {
			s.reply(c, http.StatusBadRequest, "CONNECT needs host:port")
			return
		}
		up, err := s.open(s.names.hostFor(host), port)
		if err != nil {
			s.cfg.Log.Printf("CONNECT %s: %v", req.Host, err)
			s.reply(c, http.StatusBadGateway, "the sandbox's egress proxy is unreachable: "+err.Error())
			return
		}
		if err := flush(up, br); err != nil {
			c.Close()
			up.Close()
			return
		}
		pipe(c, up)
		return
	}
	if req.URL.Host == "" {
		s.reply(c, http.StatusBadRequest, "this is the sandbox's HTTP proxy; send absolute http:// URLs or CONNECT")
		return
	}
	if port := req.URL.Port(); port != "" {
		req.URL.Host = net.JoinHostPort(s.names.hostFor(req.URL.Hostname()), port)
	} else {
		req.URL.Host = s.names.hostFor(req.URL.Hostname())
	}
	up, err := net.Dial("unix", s.cfg.Socket)
	if err != nil {
		s.reply(c, http.StatusBadGateway, "the sandbox's egress proxy is unreachable: "+err.Error())
		return
	}
	// The response flows back while the request (and its body) is still being sent.
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(c, up)
		closeWrite(c)
		close(done)
	}()
	// Later requests on this connection go to the harness as they are; it checks each.
	if err := req.WriteProxy(up); err == nil && flush(up, br) == nil {
		_, _ = io.Copy(up, c)
	}
	closeWrite(up)
	<-done
	c.Close()
	up.Close()
}

func (s *Server) reply(c net.Conn, code int, msg string) {
	body := msg + "\n"
	fmt.Fprintf(c, "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", code, http.StatusText(code), len(body), body)
	c.Close()
}
