# An agent with a sandbox cloned from the python environment. The model API key and the
# MCP token stay in the harness: the agent only names credentials that the harness
# operator declares in its --credentials file, each bound to its origins and owners.
resource "trueforge_agent" "coder" {
  name         = "coder"
  description  = "Writes and runs Python against GitHub repositories."
  instructions = "You are a careful engineer. Run the tests before you answer."

  model = {
    provider           = "anthropic"
    name               = "claude-sonnet-4-5"
    api_key_credential = "anthropic"
  }

  mcp_servers = [
    {
      name          = "github"
      url           = "https://api.githubcopilot.com/mcp/"
      credential    = "github"
      allowed_tools = ["get_file_contents", "search_code"]
    },
  ]

  # Folders in this configuration: plan reads and hashes them, apply publishes them.
  skills = [
    {
      path = "${path.module}/skills/pytest" # name: from its SKILL.md
    },
  ]

  code_mode = true

  sandbox = {
    enabled               = true
    environment           = trueforge_environment.python.name
    file_downloads        = true
    idle_stop_minutes     = 15
    archive_after_minutes = 1440
    delete_after_minutes  = 10080
  }
}

# Plain Q&A and MCP calls need no sandbox, which is off by default.
resource "trueforge_agent" "helpdesk" {
  name = "helpdesk"
  model = {
    provider = "openai"
    name     = "gpt-4.1"
  }
}
