# An agent is imported by its name.
terraform import trueforge_agent.coder coder
