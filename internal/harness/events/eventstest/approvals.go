package eventstest

import (
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
)

func init() {
	deadline := time.Date(2026, 12, 7, 13, 10, 0, 0, time.UTC)
	decided := time.Date(2026, 12, 7, 13, 1, 30, 0, time.UTC)
	Logs = append(Logs,
		Log{"approval requested for an MCP call", events.KindApprovalRequested,
			`{"id":"apr_1","tool_call_id":"c1","kind":"mcp_call","server":"https://api.githubcopilot.com/mcp","tool":"create_pull_request","arguments":"{\"title\":\"Fix\"}","rule":0,"reason":"pull requests need a person","approvers":["$caller","lead-*"],"deadline":"2026-12-07T13:10:00Z"}`,
			events.ApprovalRequested{ID: "apr_1", ToolCallID: "c1", What: "mcp_call", Server: "https://api.githubcopilot.com/mcp", Tool: "create_pull_request",
				Arguments: `{"title":"Fix"}`, Rule: 0, Reason: "pull requests need a person", Approvers: []string{"$caller", "lead-*"}, Deadline: deadline}},
		Log{"approval decided by an approver", events.KindApprovalDecided,
			`{"id":"apr_1","tool_call_id":"c1","state":"approved","by":"lead-ana","at":"2026-12-07T13:01:30Z","note":"looks right"}`,
			events.ApprovalDecided{ID: "apr_1", ToolCallID: "c1", State: "approved", By: "lead-ana", At: decided, Note: "looks right"}},
	)
}
