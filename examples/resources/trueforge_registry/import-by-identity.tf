import {
  to = trueforge_registry.internal
  identity = {
    name = "internal"
  }
}
