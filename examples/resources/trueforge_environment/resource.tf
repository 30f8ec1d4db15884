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
  labels = {
    team          = "data" # for cost allocation; keys starting with "trueforge." are the harness's own
    "cost-center" = "4711"
  }
  network = {
    allow_domains = ["api.github.com"]
    allow_cidrs   = ["192.30.252.0/22"] # public ranges only (here one of GitHub's), matched against the address connected to; private, loopback and link-local ranges are never reachable
    # pypi.org and files.pythonhosted.org, reachable by builds only: packages are
    # installed and pinned in the snapshot, and a sandbox cannot fetch more.
    package_indexes    = ["pypi"]
    package_indexes_in = "build"
  }

  timeouts = {
    create = "20m"
    update = "20m"
    delete = "30m" # deleting removes its unreferenced snapshots from the backend
  }
}

# On Daytona: a Dockerfile with a build context, a GPU, a region, a volume and a
# private registry. Each of dockerfile, a file of build_context, gpu, gpu_type,
# entrypoint, region and registry is a build input.
resource "trueforge_environment" "training" {
  name             = "training"
  sandbox_provider = trueforge_sandbox_provider.daytona.name

  # Or file("${path.module}/training/Dockerfile").
  dockerfile    = <<-EOT
    FROM registry.example.com/ml/base:2026-11
    COPY requirements.txt /opt/train/
    RUN pip install --no-cache-dir -r /opt/train/requirements.txt
  EOT
  build_context = "${path.module}/training/context" # the files the Dockerfile COPYs
  registry      = trueforge_registry.internal.name
  gpu           = 1
  gpu_type      = "H100"
  region        = "eu"
  cpu           = 8
  memory        = 32
  disk          = 50

  volumes = [{
    volume     = trueforge_volume.datasets.name
    mount_path = "/data"
    subpath    = "training"
  }]
}
