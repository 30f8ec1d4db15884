# The snapshots that hold a vulnerable version of requests, and the environments that
# use them now.
data "trueforge_snapshots" "vulnerable" {
  affected_by = "pypi:requests@<2.32.0"
}

# What the next collection removes: snapshots nothing references any more.
data "trueforge_snapshots" "unreferenced" {
  referenced = false
}

output "vulnerable_environments" {
  value = distinct(flatten([for s in data.trueforge_snapshots.vulnerable.snapshots : s.environments]))
}
