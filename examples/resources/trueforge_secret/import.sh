# A secret is imported as <environment>/<env_name>. The value is never imported: the next
# apply sends the configured value_wo (or value) again.
terraform import trueforge_secret.github python/GITHUB_TOKEN
