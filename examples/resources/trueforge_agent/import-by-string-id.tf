import {
  to = trueforge_agent.coder
  id = "coder"
}
