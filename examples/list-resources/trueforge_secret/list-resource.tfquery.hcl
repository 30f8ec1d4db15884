# The names (never the values) of the secrets of environment "py".
list "trueforge_secret" "py" {
  provider = trueforge

  config {
    environment = "py"
  }
}
