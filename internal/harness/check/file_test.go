package check

import (
	"os"
	"strings"
	"testing"
)

// Every mistake in a check file is named by its field, with the fix.
func TestParseNamesTheFieldAndTheFix(t *testing.T) {
	for _, c := range []struct{ file, want string }{
		{``, "the check file is empty"},
		{`{"steps": [`, "ends before its object does"},
		{`{"steps": [}`, "not valid JSON at line 1"},
		{`{"steps": []}`, "steps: the check has no steps"},
		{`{"timeout_seconds": 99999, "steps": [{"message": "m", "turns": [{"text": "a"}], "expect": {"no_sandbox": true}}]}`, "timeout_seconds: 99999 is outside 1..1800"},
		{`{"steps": [{"message": "m", "turns": [{"text": "a"}], "expect": {"exit_code": 0}}]}`, `unknown field "exit_code"`},
		{`{"steps": [{"message": "m", "turns": [{"text": "a"}], "expect": {"exit_codes": "0"}}]}`, "steps.expect.exit_codes (line 1): is string, want []int"},
		{`{"steps": [{"message": "", "turns": [{"text": "a"}], "expect": {"no_sandbox": true}}]}`, "steps[0].message: empty"},
		{`{"steps": [{"message": "m", "turns": [], "expect": {"no_sandbox": true}}]}`, "steps[0].turns: empty"},
		{`{"steps": [{"message": "m", "turns": [{"text": "a"}], "expect": {}}]}`, "steps[0].expect: no expectation"},
		{`{"steps": [{"message": "m", "turns": [{"text": "a"}, {"text": "b"}], "expect": {"no_sandbox": true}}]}`, "steps[0].turns[0]: a turn without tool_calls ends the message"},
		{`{"steps": [{"message": "m", "turns": [{"tool_calls": [{"name": "exec"}]}], "expect": {"exit_codes": [0]}}]}`, "steps[0].turns[0]: the last turn of a step calls tools"},
		{`{"steps": [{"message": "m", "turns": [{"tool_calls": [{"name": ""}]}, {"text": "a"}], "expect": {"exit_codes": [0]}}]}`, "steps[0].turns[0].tool_calls[0].name: empty"},
		{`{"steps": [{"message": "m", "turns": [{"text": "a"}], "expect": {"output_matches": ["("]}}]}`, "steps[0].expect.output_matches[0]: \"(\" is not a regular expression"},
		{`{"steps": [{"message": "m", "turns": [{"text": "a"}], "expect": {"no_sandbox": true, "exit_codes": [0]}}]}`, "steps[0].expect.no_sandbox: a step without a sandbox"},
		{`{"steps": [{"name": "a", "message": "m", "turns": [{"text": "a"}], "expect": {"no_sandbox": true}}, {"name": "a", "message": "m", "turns": [{"text": "a"}], "expect": {"no_sandbox": true}}]}`, `steps[1].name: "a" is also steps[0]'s name`},
	} {
		_, err := Parse([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s\n  error %v\n  want it to contain %q", c.file, err, c.want)
		}
	}
	f, err := Parse([]byte(`{"steps": [{"message": "m", "turns": [{"tool_calls": [{"name": "exec", "arguments": {"command": "true"}}]}, {"text": "ok"}], "expect": {"exit_codes": []}}]}`))
	if err != nil || f.Steps[0].Name != "step 1" || f.Steps[0].Expect.ExitCodes == nil || f.timeout() != DefaultTimeout || len(f.script().Turns) != 2 {
		t.Fatalf("a valid file: %+v %v", f, err)
	}
}

// The example check file that the action's example and the CI guide run parses.
func TestExampleCheckFileParses(t *testing.T) {
	data, err := os.ReadFile("../../../examples/actions/trueforge_agent_check/checks/helper.json")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(data)
	if err != nil {
		t.Fatalf("examples/actions/trueforge_agent_check/checks/helper.json: %v", err)
	}
	if len(f.Steps) != 3 {
		t.Fatalf("%d steps, want the guide's 3", len(f.Steps))
	}
}
