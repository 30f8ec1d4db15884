# Environment "py" builds from an image tag that moves (python:3.12, say): build its
# snapshot again from the same inputs to pick up what the tag points at now. The
# environment switches to the new snapshot, the one before becomes a previous version
# (kept as keep_versions says), and the environment's next plan shows no change.
#
#   terraform apply -invoke=action.trueforge_environment_rebuild.py
action "trueforge_environment_rebuild" "py" {
  config {
    environment = "py"
  }
}
