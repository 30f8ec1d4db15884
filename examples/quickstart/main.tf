# trueforge quickstart: one embedded (local) sandbox provider, one environment with a small
# build script, a network-scoped secret, and an agent whose sandbox is cloned from the
# environment.
#
# The provider block is empty on purpose: the control-plane database comes from
# TRUEFORGE_DATABASE_URL (scripts/demo.sh exports it), else
# ~/.local/share/trueforge/trueforge.db, and the owner is TRUEFORGE_OWNER, else the OS user.

terraform {
  required_version = ">= 1.11"

  required_providers {
    trueforge = {
      source = "trueforge/trueforge"
    }
  }
}

provider "trueforge" {}

variable "greeting" {
  description = "Value of the GREETING environment variable in the python environment. A live setting: changing it never rebuilds."
  type        = string
  default     = "hello"
}

variable "build_marker" {
  description = "Written by the build script. A build input: changing it bakes a new snapshot."
  type        = string
  default     = "v1"
}

variable "api_token" {
  description = "The secret's value. Sent write-only: it never enters plan or state."
  type        = string
  sensitive   = true
  default     = "demo-token-not-a-real-credential"
}

variable "facts_mcp_url" {
  description = "The MCP server the analyst agent's scripts call (scripts/demo.sh starts tools/demomcp there). Only the harness connects to it, with the token in its DEMO_MCP_TOKEN variable."
  type        = string
  default     = "http://127.0.0.1:8931/mcp"
}

variable "api_token_version" {
  description = "Increment to send a new api_token (a live rotation)."
  type        = number
  default     = 1
}

# The embedded backend. Creating it builds the release snapshot and the reserved
# `default` environment.
resource "trueforge_sandbox_provider" "local" {
  name = "local"
  type = "local"
}

resource "trueforge_environment" "python" {
  name             = "python"
  sandbox_provider = trueforge_sandbox_provider.local.name

  # Build inputs: they bake the snapshot. Kept fast and offline.
  build_script = <<-EOT
    printf '#!/bin/sh\necho hello from the python env\n' > /usr/local/bin/hello
    chmod +x /usr/local/bin/hello
    mkdir -p /etc/trueforge
    echo "${var.build_marker}" > /etc/trueforge/build-marker
  EOT
  cpu          = 1
  memory       = 1
  disk         = 3

  # Live settings: no rebuild; they reach sandboxes created afterwards.
  env = {
    GREETING         = var.greeting
    PYTHONUNBUFFERED = "1"
  }
  network = {
    allow_domains = ["pypi.org", "files.pythonhosted.org", "api.github.com"]
  }
}

# Forwarded only to api.github.com, although the sandbox process sees GITHUB_TOKEN.
resource "trueforge_secret" "github" {
  environment      = trueforge_environment.python.name
  env_name         = "GITHUB_TOKEN"
  value_wo         = var.api_token
  value_wo_version = var.api_token_version
  hosts            = ["api.github.com"]
}

# The scripted model replays replay.json instead of calling a model API, so the agent
# runs without any API key; the harness labels everything it says as a replay. Run it
# with `trueforge-harness run demo "What is the capital of France?"` (see
# docs/guides/running-agents.md).
resource "trueforge_agent" "demo" {
  name         = "demo"
  description  = "Quickstart agent: runs the hello tool in its sandbox."
  instructions = "Answer questions directly; use the sandbox only to run code or write files, and offer results for download."

  model = {
    provider = "scripted"
    script   = file("${path.module}/replay.json")
  }

  sandbox = {
    enabled     = true
    environment = trueforge_environment.python.name
  }
}

# Code Mode: the model writes a script that runs in the sandbox and calls the facts MCP
# server's tools as Python functions; each call crosses back to the harness, which holds
# the token (DEMO_MCP_TOKEN) and makes the call. Only what the script prints reaches the
# model. Run it with `trueforge-harness run analyst "Which capital is largest?"`.
resource "trueforge_agent" "analyst" {
  name         = "analyst"
  description  = "Quickstart Code Mode agent: combines MCP tool results in a script."
  instructions = "Use run_code to call the facts tools and compute over their results."

  model = {
    provider = "scripted"
    script   = file("${path.module}/replay-analyst.json")
  }

  mcp_servers = [{
    name           = "facts"
    url            = var.facts_mcp_url
    credential_env = "DEMO_MCP_TOKEN"
  }]
  code_mode = true

  # A skill: a folder of this configuration (SKILL.md with its name and description, and
  # a script), published by apply and loaded into the sandbox when the model asks for it.
  skills = [{ path = "${path.module}/skills/facts-table" }]

  sandbox = {
    enabled     = true
    environment = trueforge_environment.python.name
  }
}

output "snapshot_id" {
  description = "The snapshot new sandboxes of the python environment are cloned from."
  value       = trueforge_environment.python.snapshot_id
}

output "status" {
  description = "Build status of the python environment."
  value       = trueforge_environment.python.status
}

output "build_hash" {
  description = "Content address of the python environment's build inputs."
  value       = trueforge_environment.python.build_hash
}

output "default_environment" {
  description = "The reserved environment the sandbox provider created."
  value       = trueforge_sandbox_provider.local.default_environment
}

output "agent" {
  value = trueforge_agent.demo.id
}
