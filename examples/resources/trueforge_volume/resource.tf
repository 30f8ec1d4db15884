# Files that outlive sandboxes: every sandbox of the environments that list the volume
# mounts it read-write, so sessions share what they write there. On Daytona it is a
# Daytona volume named trueforge-<name>; on the local backend a directory under the
# control plane's data directory.
resource "trueforge_volume" "datasets" {
  name             = "datasets"
  sandbox_provider = trueforge_sandbox_provider.daytona.name
}

resource "trueforge_environment" "analysis" {
  name             = "analysis"
  sandbox_provider = trueforge_sandbox_provider.daytona.name
  build_script     = "pip install pandas"

  # At most 8 volumes, each at its own absolute path outside the system folders. A
  # subpath mounts one folder of the volume (created when missing).
  volumes = [
    { volume = trueforge_volume.datasets.name, mount_path = "/data" },
    { volume = trueforge_volume.datasets.name, mount_path = "/workspace/scratch", subpath = "scratch/analysis" },
  ]
}
