# Every environment of a team whose last build failed (terraform query).
list "trueforge_environment" "failed" {
  provider = trueforge

  config {
    owner  = "team-data"
    status = "Failed"
  }
}

# The Ready environments of the local sandbox provider, with their full configuration
# (what -generate-config-out writes).
list "trueforge_environment" "local_ready" {
  provider         = trueforge
  include_resource = true
  limit            = 500

  config {
    sandbox_provider = "local"
    status           = "Ready"
  }
}
