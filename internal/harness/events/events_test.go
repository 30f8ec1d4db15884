package events_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events/eventstest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func TestDecodeReadsEveryStoredShape(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range eventstest.Logs {
		seen[c.Kind] = true
		got, err := events.Decode(c.Kind, []byte(c.JSON))
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if !reflect.DeepEqual(got, c.Want) {
			t.Errorf("%s:\n got %#v\nwant %#v", c.Name, got, c.Want)
		}
		if got.Kind() != c.Kind {
			t.Errorf("%s: decoded as kind %q, stored as %q", c.Name, got.Kind(), c.Kind)
		}
	}
	for kind := range events.Decoders {
		if !seen[kind] {
			t.Errorf("no stored shape of kind %q in eventstest.Logs", kind)
		}
	}
}

// What is written today reads back as written, and sandbox_lost has one field set
// whichever shape it was stored in.
func TestEncodeRoundTrips(t *testing.T) {
	for _, c := range eventstest.Logs {
		b, err := events.Encode(c.Want)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		got, err := events.Decode(c.Want.Kind(), b)
		if err != nil || !reflect.DeepEqual(got, c.Want) {
			t.Errorf("%s: %s reads back as %#v, %v", c.Name, b, got, err)
		}
	}
	b, _ := events.Encode(events.SandboxLost{SandboxID: "x", State: "running", BackendStatus: "gone", Reason: "r"})
	var keys map[string]any
	_ = json.Unmarshal(b, &keys)
	if _, ok := keys["status"]; ok {
		t.Errorf("sandbox_lost still written with status: %s", b)
	}
	if _, ok := keys["cause"]; ok {
		t.Errorf("sandbox_lost still written with cause: %s", b)
	}
	a, _ := json.Marshal(events.ArtifactOf(&store.Artifact{Path: "p", ExpiresAt: time.Now(), Content: []byte("secret-ish")}))
	if err := json.Unmarshal(a, &keys); err != nil || keys["path"] != "p" || keys["expires_at"] == nil || keys["Content"] != nil || keys["content"] != nil {
		t.Errorf("artifact written as %s; want json field names and no content", a)
	}
}

func TestUnknownKinds(t *testing.T) {
	got, err := events.Decode("from_a_newer_harness", []byte(`{"x":1}`))
	if err != nil || got.Kind() != "from_a_newer_harness" || string(got.(events.Unknown).Raw) != `{"x":1}` {
		t.Fatalf("unknown kind decoded as %#v, %v", got, err)
	}
	if _, err := events.Encode(got); err == nil {
		t.Fatal("an unknown kind was encoded")
	}
	if _, err := events.Encode(events.SandboxIdle{State: "exploded"}); err == nil {
		t.Fatal("sandbox_exploded was encoded")
	}
	if _, ok := events.As[events.ToolResult](events.KindToolCall, []byte(`{}`)); ok {
		t.Fatal("As read a tool_call as a tool_result")
	}
	if p, ok := events.As[events.ToolResult](events.KindToolResult, []byte(`{"id":"c"}`)); !ok || p.ID != "c" {
		t.Fatalf("As: %#v %v", p, ok)
	}
}
