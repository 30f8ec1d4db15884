# A registry is imported by its name. The password is never imported: the next apply
# sends the configured password_wo (or password) again.
terraform import trueforge_registry.internal internal
