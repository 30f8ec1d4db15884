# After a secret of agent "support" leaked: rotate the secret, then stop every running
# sandbox of the agent's sessions, so that no process holding the old value keeps running.
#
#   terraform apply -invoke=action.trueforge_sandboxes_stop.support
action "trueforge_sandboxes_stop" "support" {
  config {
    agent = "support"
  }
}

# Or every sandbox made from an environment, whichever agent's sessions they serve.
action "trueforge_sandboxes_stop" "py" {
  config {
    environment = "py"
  }
}
