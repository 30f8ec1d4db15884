# Every Ready environment of the payments team, by name.
data "trueforge_environments" "payments_ready" {
  owner  = "team_payments"
  status = "Ready"
}

output "payments_environments" {
  value = data.trueforge_environments.payments_ready.names
}

# Each environment's snapshot, keyed by name.
output "payments_snapshots" {
  value = { for e in data.trueforge_environments.payments_ready.environments : e.name => e.snapshot_id }
}
