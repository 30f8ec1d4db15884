# A sandbox provider is imported by its name.
terraform import trueforge_sandbox_provider.local local
