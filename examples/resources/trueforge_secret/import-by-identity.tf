# The value is never imported: the next apply sends the configured value_wo (or value) again.
import {
  to = trueforge_secret.github
  identity = {
    environment = "python"
    env_name    = "GITHUB_TOKEN"
  }
}
