package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// run and sessions show print the limits a sandbox runs without, with the reasons, right
// under the PROVISIONED line; a sandbox with every limit enforced gets no such line.
func TestPrintUnenforcedLimits(t *testing.T) {
	for _, c := range []struct {
		name       string
		unenforced []sandbox.UnenforcedLimit
		want       []string
	}{
		{"some limits not enforced", []sandbox.UnenforcedLimit{
			{Limit: "cpu", Reason: "no writable cgroup: running as uid 1000 on a cgroup v1 host"},
			{Limit: "memory", Reason: "enforced per process only"},
		}, []string{
			"[sandbox] PROVISIONED tf-s-1-1",
			"[sandbox] WARNING: limits not enforced on this host: cpu, memory",
			"require_limits = true",
			"cpu: no writable cgroup: running as uid 1000 on a cgroup v1 host",
			"memory: enforced per process only",
		}},
		{"all enforced", nil, []string{"[sandbox] PROVISIONED tf-s-1-1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			payload, err := json.Marshal(events.SandboxProvisioned{SandboxID: "tf-s-1-1", ProviderType: "local", Provider: "local",
				Environment: "default", SnapshotID: "snap-1", Generation: 1, Reason: "first call that needs a sandbox",
				Limits: sandbox.Limits{CPU: 1, MemoryMB: 1024, DiskMB: 3072}, LimitsEnforced: len(c.unenforced) == 0, UnenforcedLimits: c.unenforced})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			newPrinter(&out, false, false).render(store.Event{Kind: events.KindSandboxProvisioned, Payload: payload}, false)
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output %q lacks %q", out.String(), w)
				}
			}
			if c.unenforced == nil && strings.Contains(out.String(), "WARNING") {
				t.Errorf("a warning for a sandbox with every limit enforced: %q", out.String())
			}
		})
	}
}
