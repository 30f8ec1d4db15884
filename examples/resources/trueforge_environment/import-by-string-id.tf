import {
  to = trueforge_environment.python
  id = "python"
}
