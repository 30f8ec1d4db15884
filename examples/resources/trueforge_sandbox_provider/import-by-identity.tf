import {
  to       = trueforge_sandbox_provider.local
  identity = { name = "local" }
}
