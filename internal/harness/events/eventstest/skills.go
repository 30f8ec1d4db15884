package eventstest

import "github.com/trueforge/terraform-provider-trueforge/internal/harness/events"

func init() {
	Logs = append(Logs, Log{"skill loaded", events.KindSkillLoaded,
		`{"bytes":160,"digest":"sha256:0f1e","files":3,"generation":2,"name":"pdf","path":".skills/pdf","read_only":true,"sandbox_id":"tf-s-abc-2"}`,
		events.SkillLoaded{Name: "pdf", Digest: "sha256:0f1e", SandboxID: "tf-s-abc-2", Generation: 2, Path: ".skills/pdf", Files: 3, Bytes: 160, ReadOnly: true}})
}
