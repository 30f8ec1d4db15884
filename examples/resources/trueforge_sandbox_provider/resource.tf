# The embedded backend: sandboxes and snapshot builds run on this Linux machine under
# bubblewrap. Creating it builds the release snapshot and the reserved `default`
# environment (platform image, 1 CPU, 1 GB memory, 3 GB disk).
resource "trueforge_sandbox_provider" "local" {
  name = "local"
  type = "local"
}
