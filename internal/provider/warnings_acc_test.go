package provider

import (
	"context"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
)

// terraform-plugin-testing cannot see warnings (plan_warnings_test.go), so acceptance
// tests that must show one wrap the in-process provider server in a warningRecorder,
// which keeps every warning a refresh (ReadResource) returned.
type warningRecorder struct {
	mu   sync.Mutex
	seen []*tfprotov6.Diagnostic
}

// wrap returns factory's servers with their refresh warnings recorded.
func (w *warningRecorder) wrap(factory func() (tfprotov6.ProviderServer, error)) func() (tfprotov6.ProviderServer, error) {
	return func() (tfprotov6.ProviderServer, error) {
		srv, err := factory()
		if err != nil {
			return nil, err
		}
		return recordingServer{srv, w}, nil
	}
}

// reset forgets the warnings seen so far.
func (w *warningRecorder) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = nil
}

// find returns the first warning seen with summary whose detail holds every fragment.
func (w *warningRecorder) find(summary string, fragments ...string) *tfprotov6.Diagnostic {
	w.mu.Lock()
	defer w.mu.Unlock()
next:
	for _, d := range w.seen {
		if d.Summary != summary {
			continue
		}
		for _, f := range fragments {
			if !strings.Contains(d.Detail, f) {
				continue next
			}
		}
		return d
	}
	return nil
}

// summaries lists the summaries of the warnings seen (for failure messages).
func (w *warningRecorder) summaries() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, d := range w.seen {
		out = append(out, d.Summary)
	}
	return out
}

type recordingServer struct {
	tfprotov6.ProviderServer
	w *warningRecorder
}

func (s recordingServer) ReadResource(ctx context.Context, req *tfprotov6.ReadResourceRequest) (*tfprotov6.ReadResourceResponse, error) {
	resp, err := s.ProviderServer.ReadResource(ctx, req)
	if resp != nil {
		s.w.mu.Lock()
		for _, d := range resp.Diagnostics {
			if d.Severity == tfprotov6.DiagnosticSeverityWarning {
				s.w.seen = append(s.w.seen, d)
			}
		}
		s.w.mu.Unlock()
	}
	return resp, err
}
