# The control plane's sandbox provider, for a module that creates environments on it
# without managing it (a control plane has one, so the name may be left out).
data "trueforge_sandbox_provider" "this" {}

resource "trueforge_environment" "team" {
  name             = "team-python"
  sandbox_provider = data.trueforge_sandbox_provider.this.name
  build_script     = "apt-get update && apt-get install -y python3-pip"
}
