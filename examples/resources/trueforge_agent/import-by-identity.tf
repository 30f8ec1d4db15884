import {
  to       = trueforge_agent.coder
  identity = { name = "coder" }
}
