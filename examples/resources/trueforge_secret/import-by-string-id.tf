# <environment>/<env_name>
import {
  to = trueforge_secret.github
  id = "python/GITHUB_TOKEN"
}
