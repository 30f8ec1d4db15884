# The sessions of one user with agent "coder", newest first.
data "trueforge_sessions" "carol_coder" {
  agent = "coder"
  owner = "carol"
}

output "carol_last_activity" {
  value = [for s in data.trueforge_sessions.carol_coder.sessions : "${s.id}: ${s.last_activity}"]
}
