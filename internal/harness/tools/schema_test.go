package tools

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/agents"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/model"
)

// schemasBefore are the tool schemas the model was given before they were derived from
// the argument types (the literal specs of the harness up to then), in offer order.
var schemasBefore = []struct{ name, description, parameters string }{
	{"read_output", "Read part of the full output of an earlier tool call whose result was cut.",
		`{"properties": {"call_id": {"description": "The id of the tool call.", "type": "string"}, "length": {"description": "Bytes to read (at most 16384).", "type": "integer"}, "offset": {"description": "Byte offset to start at.", "type": "integer"}}, "required": ["call_id"], "type": "object"}`},
	{"exec", "Run a shell command (/bin/sh -c) in this session's sandbox, in /workspace. Files persist across turns of the session.",
		`{"properties": {"command": {"description": "The shell command.", "type": "string"}, "cwd": {"description": "Working directory, default /workspace.", "type": "string"}, "timeout_seconds": {"description": "Wall-clock limit, default 120, at most 1800.", "type": "integer"}}, "required": ["command"], "type": "object"}`},
	{"read_file", "Read a file of the sandbox workspace.",
		`{"properties": {"max_bytes": {"description": "Largest size to read, default 262144.", "type": "integer"}, "path": {"description": "Path relative to /workspace.", "type": "string"}}, "required": ["path"], "type": "object"}`},
	{"write_file", "Write a file in the sandbox workspace, creating directories.",
		`{"properties": {"content": {"description": "The file's content.", "type": "string"}, "path": {"description": "Path relative to /workspace.", "type": "string"}}, "required": ["path", "content"], "type": "object"}`},
	{"list_files", "List a directory of the sandbox workspace.",
		`{"properties": {"dir": {"description": "Directory relative to /workspace, default the workspace.", "type": "string"}}, "required": [], "type": "object"}`},
	{"offer_artifact", "Offer a workspace file to the user for download.",
		`{"properties": {"classification": {"description": "One of untrusted (default), internal, confidential, restricted, public. The operator's policy says who may download each: by default confidential only the session's owner, and restricted nobody until an admin releases it (data that must not leave without review).", "type": "string"}, "expires_in_hours": {"description": "How long the download is offered, default 168.", "type": "integer"}, "path": {"description": "Path relative to /workspace.", "type": "string"}}, "required": ["path"], "type": "object"}`},
	// Added with the tool (issue 27), not from before the derivation.
	{"extract_archive", "Extract an archive of the workspace (zip, tar, tar.gz, tar.bz2, tar.xz, tar.zst) into a new or empty folder, safely: entries that would " +
		"land outside the folder (absolute paths, .., symlinks or hard links pointing out), devices, FIFOs and names with control characters are " +
		"skipped and listed with the reason, set-user-ID bits are dropped, and limits on entries, bytes and compression ratio stop a " +
		"decompression bomb. Use it instead of tar or unzip for any archive you did not make yourself.",
		`{"properties": {"dest": {"description": "Folder to extract into, relative to /workspace; it must not exist yet or be empty. Default: the archive's name without its extension, beside it.", "type": "string"}, "path": {"description": "The archive, relative to /workspace: zip, tar, tar.gz, tar.bz2, tar.xz or tar.zst (told by its content, not its name).", "type": "string"}}, "required": ["path"], "type": "object"}`},
}

// The schemas derived from the argument types are the ones the model saw before:
// names, descriptions, properties with their types and descriptions (which carry the
// defaults and limits), and required fields; "required" is a []string, as the Anthropic
// client reads it, and present when empty.
func TestSchemasUnchanged(t *testing.T) {
	for _, c := range []struct {
		name               string
		sandbox, downloads bool
		want               []string
	}{
		{"no sandbox", false, false, []string{"read_output"}},
		{"sandbox", true, false, []string{"read_output", "exec", "read_file", "write_file", "list_files", "extract_archive"}},
		{"sandbox with downloads", true, true, []string{"read_output", "exec", "read_file", "write_file", "list_files", "offer_artifact", "extract_archive"}},
	} {
		a := &agents.Agent{}
		a.Spec.Sandbox.Enabled, a.Spec.Sandbox.FileDownloads = c.sandbox, c.downloads
		specs := Specs(a)
		var names []string
		for _, s := range specs {
			names = append(names, s.Name)
		}
		if !reflect.DeepEqual(names, c.want) {
			t.Fatalf("%s: tools %v; want %v", c.name, names, c.want)
		}
		for i, s := range specs {
			before := schemasBefore[slicesIndex(c.want[i])]
			var want map[string]any
			if err := json.Unmarshal([]byte(before.parameters), &want); err != nil {
				t.Fatal(err)
			}
			want["required"] = toStrings(want["required"].([]any))
			if s.Description != before.description {
				t.Errorf("%s: description %q; want %q", s.Name, s.Description, before.description)
			}
			if !reflect.DeepEqual(s.Parameters, want) {
				got, _ := json.Marshal(s.Parameters)
				t.Errorf("%s: parameters\n got %s\nwant %s", s.Name, got, before.parameters)
			}
		}
	}
	// The descriptions state the defaults and limits the handlers apply.
	if DefaultExecTimeout != 120*time.Second || MaxExecTimeout != 1800*time.Second || DefaultReadBytes != 262144 ||
		MaxReadBytes != 16<<20 || DefaultArtifactTTL != 168*time.Hour || DefaultLimit-256 > 16384 {
		t.Fatal("a default or limit changed: change the jsonschema tag that tells the model, and schemasBefore")
	}
}

func slicesIndex(name string) int {
	for i, s := range schemasBefore {
		if s.name == name {
			return i
		}
	}
	panic(name)
}

func toStrings(v []any) []string {
	out := []string{}
	for _, s := range v {
		out = append(out, s.(string))
	}
	return out
}

// Bad arguments are answered before any sandbox is touched, with the tool, the field,
// what it must be and how to fix the call; unknown arguments are ignored, as before.
func TestBadArguments(t *testing.T) {
	ctx := context.Background()
	st := sessionStore(t)
	a := &agents.Agent{}
	a.Spec.Sandbox.Enabled, a.Spec.Sandbox.FileDownloads = true, true
	x := &Executor{Store: st} // no sandbox manager: a call that got past its arguments says so
	for _, c := range []struct{ tool, args, want string }{
		{"exec", `{}`, `exec: the required argument "command" is missing (string: The shell command.); call exec again with it`},
		{"exec", ``, `exec: the required argument "command" is missing`},
		{"exec", `{"command": null}`, `exec: the required argument "command" is missing`},
		{"exec", `{"command": 5}`, `exec: argument "command" must be a string, not a number (The shell command.); call exec again with it fixed`},
		{"exec", `{"command": "ls", "timeout_seconds": "10"}`,
			`exec: argument "timeout_seconds" must be an integer, not a string (Wall-clock limit, default 120, at most 1800.)`},
		{"exec", `["ls"]`, `exec: the arguments must be a JSON object {"command": string (required), "timeout_seconds": integer, "cwd": string}, not ["ls"]`},
		{"exec", `{"command": "  "}`, "exec: command is empty; give a shell command"},
		{"read_file", `{"path": "a", "max_bytes": 1.5}`, `read_file: argument "max_bytes" must be an integer, not 1.5 (Largest size to read, default 262144.)`},
		{"write_file", `{"path": "a"}`, `write_file: the required argument "content" is missing (string: The file's content.)`},
		{"list_files", `{"dir": true}`, `list_files: argument "dir" must be a string, not a boolean`},
		{"offer_artifact", `{"path": "a", "classification": "secret"}`, `offer_artifact: classification "secret" is not one of untrusted, internal, confidential, restricted, public`},
		{"read_output", `{"offset": 3}`, `read_output: the required argument "call_id" is missing (string: The id of the tool call.)`},
		{"exec", `{"command": "true", "timeout": 5}`, "this harness has no sandbox manager"},
		{"list_files", `{}`, "this harness has no sandbox manager"},
		{"nope", `{}`, `unknown tool "nope"`},
	} {
		res := x.Run(ctx, Call{SessionID: "s-1", Agent: a}, model.ToolCall{ID: "c", Name: c.tool, Arguments: json.RawMessage(c.args)})
		if !res.IsError || !strings.Contains(res.Text, c.want) {
			t.Errorf("%s %s: %+v; want an error with %q", c.tool, c.args, res, c.want)
		}
	}
	// A tool the agent is not offered is unknown to it, whatever its arguments.
	res := x.Run(ctx, Call{SessionID: "s-1", Agent: &agents.Agent{}}, model.ToolCall{ID: "c", Name: "exec", Arguments: json.RawMessage(`{"command":"ls"}`)})
	if !res.IsError || res.Text != `unknown tool "exec"` {
		t.Errorf("exec without a sandbox: %+v", res)
	}
}
