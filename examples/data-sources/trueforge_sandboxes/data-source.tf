# Which sandboxes are still running for agent "coder" (read as a harness role on
# PostgreSQL: the harness's records are not granted to team roles).
data "trueforge_sandboxes" "coder_running" {
  agent = "coder"
  state = "running"
}

output "coder_running" {
  value = { for b in data.trueforge_sandboxes.coder_running.sandboxes : b.sandbox_id => b.idle_since }
}
