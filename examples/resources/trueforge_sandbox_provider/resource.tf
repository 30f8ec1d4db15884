# The embedded backend: sandboxes and snapshot builds run on this Linux machine under
# bubblewrap. Creating it builds the release snapshot and the reserved `default`
# environment (platform image, 1 CPU, 1 GB memory, 3 GB disk).
resource "trueforge_sandbox_provider" "local" {
  name = "local"
  type = "local"
}

# Daytona, once this build of the provider ships its backend. The key needs the
# write:sandboxes, write:snapshots and manage:secrets scopes. api_key_wo keeps it out of
# plan and state; bump api_key_wo_version to rotate it.
#
# resource "trueforge_sandbox_provider" "daytona" {
#   name               = "daytona"
#   type               = "daytona"
#   api_key_wo         = var.daytona_api_key
#   api_key_wo_version = 1
#   target             = "us"
# }
