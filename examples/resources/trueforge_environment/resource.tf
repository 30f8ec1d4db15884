resource "trueforge_environment" "python" {
  name             = "python"
  sandbox_provider = trueforge_sandbox_provider.local.name

  # Build inputs: changing any of these bakes a new snapshot (an in-place update).
  image        = "platform"
  build_script = <<-EOT
    mkdir -p /opt/tools
    printf '#!/bin/sh\necho hello from the python env\n' > /usr/local/bin/hello
    chmod +x /usr/local/bin/hello
  EOT
  cpu          = 2
  memory       = 4
  disk         = 10
  triggers = {
    # Rebuild when an input outside this configuration changes.
    requirements = "2026-11-01"
  }

  # Live settings: applied without a rebuild; they reach sandboxes created afterwards.
  env = {
    PYTHONUNBUFFERED = "1"
    PIP_INDEX_URL    = "https://pypi.org/simple"
  }
  network = {
    allow_domains = ["pypi.org", "*.pythonhosted.org", "api.github.com"]
  }

  timeouts = {
    create = "20m"
    update = "20m"
    delete = "30m" # deleting removes its unreferenced snapshots from the backend
  }
}
