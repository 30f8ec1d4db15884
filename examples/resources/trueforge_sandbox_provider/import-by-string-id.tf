import {
  to = trueforge_sandbox_provider.local
  id = "local"
}
