# The agents whose sandboxes are cloned from environment "py".
data "trueforge_agents" "on_py" {
  environment = "py"
}

# The Code Mode agents of one team.
data "trueforge_agents" "payments_code_mode" {
  owner     = "team_payments"
  code_mode = true
}

output "agents_on_py" {
  value = data.trueforge_agents.on_py.names
}
