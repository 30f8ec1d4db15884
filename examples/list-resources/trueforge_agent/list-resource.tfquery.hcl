# The agents whose sandboxes run in environment "py".
list "trueforge_agent" "on_py" {
  provider = trueforge

  config {
    environment = "py"
  }
}

# Every agent a team published.
list "trueforge_agent" "team_data" {
  provider = trueforge

  config {
    owner = "team-data"
  }
}
