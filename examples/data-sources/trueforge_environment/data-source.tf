# The reserved environment every sandbox provider creates.
data "trueforge_environment" "default" {
  name = "default"
}

output "default_snapshot" {
  value = data.trueforge_environment.default.snapshot_id
}

output "default_status" {
  value = data.trueforge_environment.default.status
}
