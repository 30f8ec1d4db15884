# Every volume of the local sandbox provider.
list "trueforge_volume" "local" {
  provider = trueforge

  config {
    sandbox_provider = "local"
  }
}
