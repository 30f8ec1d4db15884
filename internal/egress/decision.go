package egress

import (
	"encoding/json"
	"io"
	"sync"
	"time"
)

// Decision is one line of a sandbox's egress log: every CONNECT, every plain request and
// every request inside a terminated tunnel gets one. It never holds a secret's value.
type Decision struct {
	Time    time.Time `json:"time"`
	Sandbox string    `json:"sandbox"`
	Allowed bool      `json:"allowed"`
	// Reason is a Reason* code for a refusal, "" when allowed.
	Reason string `json:"reason,omitempty"`
	// Mode is how the connection is carried: "tunnel" (opaque TLS), "terminate" (TLS
	// terminated by the proxy), "plain" (http:// through the proxy).
	Mode   string `json:"mode"`
	Host   string `json:"host"`
	Port   string `json:"port"`
	Method string `json:"method,omitempty"`
	Path   string `json:"path,omitempty"`
	// Addr is the address the proxy dialled, when it got that far.
	Addr string `json:"addr,omitempty"`
	// Secrets names the secrets whose placeholders were replaced in this request.
	Secrets []string `json:"secrets,omitempty"`
	Message string   `json:"message,omitempty"`
}

// DecisionSink receives every decision of one sandbox's proxy, in order per connection.
// It must not block for long; it is called on the connection's goroutine.
type DecisionSink func(Decision)

// JSONLines returns a sink writing one JSON object per line to w (a session's log file,
// say); safe for concurrent use. Write errors are dropped: logging never blocks egress.
func JSONLines(w io.Writer) DecisionSink {
	var mu sync.Mutex
	return func(d Decision) {
		b, err := json.Marshal(d)
		if err != nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		_, _ = w.Write(append(b, '\n'))
	}
}
