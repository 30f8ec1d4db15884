# Daytona: snapshots, sandboxes and secrets in a Daytona organization. The key needs the
# write:sandboxes, write:snapshots and manage:secrets scopes (saving fails, naming the
# missing ones, otherwise). api_key_wo keeps it out of plan and state; bump
# api_key_wo_version to rotate it.
variable "daytona_api_key" {
  type      = string
  sensitive = true
  ephemeral = true
}

resource "trueforge_sandbox_provider" "daytona" {
  name               = "daytona"
  type               = "daytona"
  api_key_wo         = var.daytona_api_key
  api_key_wo_version = 1
  target             = "us"
}
