# After every update of environment "tools", run checks/helper.json against agent
# "helper" in a fresh sandbox: an environment change that breaks the agent (a build that
# no longer installs a command it runs) fails the apply that made it, naming the step.
resource "trueforge_environment" "tools" {
  name             = "tools"
  sandbox_provider = trueforge_sandbox_provider.local.name
  build_script     = "apt-get update && apt-get install -y jq"

  lifecycle {
    action_trigger {
      events  = [after_update]
      actions = [action.trueforge_agent_check.helper]
    }
  }
}

action "trueforge_agent_check" "helper" {
  config {
    agent = "helper" # a literal name: referencing trueforge_agent.helper would make a cycle
    check = file("${path.module}/checks/helper.json")
  }
}

# Run it on demand too: terraform apply -invoke=action.trueforge_agent_check.helper
