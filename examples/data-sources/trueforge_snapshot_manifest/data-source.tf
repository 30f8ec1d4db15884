# What the python environment's current snapshot contains.
data "trueforge_snapshot_manifest" "python" {
  environment = "python"
}

# Every package at a version, for example to check a pin.
output "python_packages" {
  value = [for p in data.trueforge_snapshot_manifest.python.packages : "${p.ecosystem}:${p.name}@${p.version}"]
}

# The digest artifacts record as their manifest_digest.
output "python_manifest_digest" {
  value = data.trueforge_snapshot_manifest.python.digest
}

# A CycloneDX 1.5 SBOM, for a scanner (terraform output -raw python_sbom > python.cdx.json).
output "python_sbom" {
  value = data.trueforge_snapshot_manifest.python.cyclonedx
}
