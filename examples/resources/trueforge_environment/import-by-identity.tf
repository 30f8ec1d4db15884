import {
  to       = trueforge_environment.python
  identity = { name = "python" }
}
