//go:build linux

package local

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
)

// The control protocol between the runtime (host) and a sandbox's init, over one unix
// stream connection per exec. Every message is a frame: a 4-byte big-endian length and a
// JSON object. The first frame from the host is an execRequest and carries the command's
// stdio as SCM_RIGHTS file descriptors, so the command writes straight into pipes the
// host reads; no byte of output passes through the init. Then:
//
//	init -> host  initReply{Pid} once started (or {Exit, Error} when it could not start)
//	host -> init  hostMsg{Kill} at any time: kill the command's process group
//	init -> host  initReply{Exit...} once the command ended (after a kill: once every
//	              process of its group is gone)
//
// A host that closes the connection kills the command too. The init runs as the sandbox
// user, so the host treats what it says as untrusted: frames are size-capped and only
// decoded into these structs.

// maxFrame caps one frame: argv and env of a request, or a reply.
const maxFrame = 4 << 20

type execRequest struct {
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Dir   string   `json:"dir"`
	Stdin bool     `json:"stdin,omitempty"` // fds are [stdin, stdout, stderr]; else [stdout, stderr]
	// Ping asks only for an answer ({Exited, Exit: 0}), without fds: the init is up.
	Ping bool `json:"ping,omitempty"`
}

type initReply struct {
	Pid    int    `json:"pid,omitempty"`
	Exited bool   `json:"exited,omitempty"`
	Exit   int    `json:"exit,omitempty"`
	Signal int    `json:"signal,omitempty"`
	Killed bool   `json:"killed,omitempty"` // ended because the host asked
	Error  string `json:"error,omitempty"`  // could not start, or could not kill
}

type hostMsg struct {
	Kill bool `json:"kill,omitempty"`
}

func writeFrame(c *net.UnixConn, v any, files []*os.File) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(data)), uint32(len(data)))
	buf = append(buf, data...)
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = syscall.UnixRights(fds...)
	}
	n, oobn, err := c.WriteMsgUnix(buf, oob, nil)
	if err != nil {
		return err
	}
	if n != len(buf) || oobn != len(oob) {
		return io.ErrShortWrite
	}
	return nil
}

// readFrame reads one frame into v and returns the file descriptors that came with it
// (at most maxFds; any more are closed).
func readFrame(c *net.UnixConn, v any, maxFds int) ([]*os.File, error) {
	var files []*os.File
	head := make([]byte, 4)
	oob := make([]byte, syscall.CmsgSpace(4*maxFds))
	got := 0
	for got < 4 {
		var n, oobn int
		var err error
		if maxFds > 0 && len(files) == 0 {
			n, oobn, _, _, err = c.ReadMsgUnix(head[got:], oob)
			if oobn > 0 {
				fs, perr := parseRights(oob[:oobn], maxFds)
				files = append(files, fs...)
				if perr != nil {
					closeAll(files)
					return nil, perr
				}
			}
		} else {
			n, err = c.Read(head[got:])
		}
		got += n
		if err != nil {
			closeAll(files)
			if got == 0 && errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, err
		}
	}
	size := binary.BigEndian.Uint32(head)
	if size > maxFrame {
		closeAll(files)
		return nil, fmt.Errorf("control frame of %d bytes, over %d", size, maxFrame)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c, body); err != nil {
		closeAll(files)
		return nil, err
	}
	if err := json.Unmarshal(body, v); err != nil {
		closeAll(files)
		return nil, fmt.Errorf("control frame: %w", err)
	}
	return files, nil
}

func parseRights(oob []byte, maxFds int) ([]*os.File, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var files []*os.File
	var errOut error
	for _, m := range msgs {
		fds, err := syscall.ParseUnixRights(&m)
		if err != nil {
			continue
		}
		for _, fd := range fds {
			syscall.CloseOnExec(fd)
			if len(files) >= maxFds {
				syscall.Close(fd)
				errOut = errors.New("too many file descriptors")
				continue
			}
			files = append(files, os.NewFile(uintptr(fd), "passed"))
		}
	}
	return files, errOut
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}
