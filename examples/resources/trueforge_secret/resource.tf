variable "github_token" {
  type      = string
  sensitive = true
  ephemeral = true
}

# The sandbox process sees GITHUB_TOKEN, but its value is only forwarded to the listed
# hosts. value_wo never enters plan or state; increment value_wo_version to rotate it,
# which reaches running sandboxes at once.
resource "trueforge_secret" "github" {
  environment      = trueforge_environment.python.name
  env_name         = "GITHUB_TOKEN"
  value_wo         = var.github_token
  value_wo_version = 1
  hosts            = ["api.github.com", "*.githubusercontent.com"]
}
