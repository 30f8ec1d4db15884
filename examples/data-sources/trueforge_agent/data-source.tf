data "trueforge_agent" "coder" {
  name = "coder"
}

output "coder_environment" {
  value = data.trueforge_agent.coder.sandbox.environment
}
