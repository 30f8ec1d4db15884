variable "registry_token" {
  type      = string
  sensitive = true
  ephemeral = true
}

# A private registry on a daytona sandbox provider (the local backend runs only the
# platform image and refuses registries). Daytona pulls an image with the registry whose
# URL matches the image's host, so the environments' images start with
# registry.example.com. password_wo never enters plan or state; increment
# password_wo_version to rotate it (the Daytona registry is updated in place).
resource "trueforge_registry" "internal" {
  name                = "internal"
  sandbox_provider    = trueforge_sandbox_provider.daytona.name
  url                 = "registry.example.com"
  username            = "ci-bot"
  password_wo         = var.registry_token
  password_wo_version = 1
}

resource "trueforge_environment" "private" {
  name             = "private"
  sandbox_provider = trueforge_sandbox_provider.daytona.name
  image            = "registry.example.com/ml/agent-base:1.4"
  registry         = trueforge_registry.internal.name
}
