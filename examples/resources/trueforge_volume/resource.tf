# Files that outlive sandboxes: every sandbox of the environments that list the volume
# mounts it read-write, so sessions share what they write there. On Daytona it is a
# Daytona volume named trueforge-<name>; on the local backend a directory under the
# control plane's data directory.
#
# Only this owner's environments may mount it, unless shared_with names other owners
# (PostgreSQL roles, or SQLite owner names; "*" for all). size (GB, default 10) caps it
# on the local backend (an ext4 image of that size, as root); Daytona volumes have no
# size, so there it is recorded only and plan warns when it is set.
resource "trueforge_volume" "datasets" {
  name             = "datasets"
  sandbox_provider = trueforge_sandbox_provider.daytona.name
  shared_with      = ["team_research"]
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
