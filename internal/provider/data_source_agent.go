package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// NewAgentDataSource is the trueforge_agent data source.
func NewAgentDataSource() datasource.DataSource {
	return &dataSource[agentModel]{
		typeName: "_agent",
		schema:   agentDataSourceSchema(),
		read: byName("Agent", func(m *agentModel) types.String { return m.Name }, (*store.Store).GetAgent,
			"No agent %q exists in this control plane. Check the name; an agent created in the same configuration "+
				"should be referenced by its trueforge_agent resource's name so Terraform creates it first.", readAgent),
	}
}

// readAgent fills the data source in from the agent a as the resource's Read does.
func readAgent(ctx context.Context, _ *controlPlane, m *agentModel, a store.Agent, diags *diag.Diagnostics) {
	diags.Append(m.fromStore(ctx, a)...)
}

func agentDataSourceSchema() schema.Schema {
	return schema.Schema{
		MarkdownDescription: "Reads a published agent by name: its model, instructions, MCP servers, skills and sandbox settings, as the harness runs it.",
		Attributes: map[string]schema.Attribute{
			"code_mode":        computedBool("Whether Code Mode is on (scripts in the sandbox call MCP tools through the harness)."),
			"description":      computedString("What the agent is for."),
			"max_turns":        computedInt64("Model steps the harness allows for one user message."),
			"code_mode_limits": codeModeLimitsDataSchema(),
			"token_budget":     computedInt64("Tokens (input plus output) one user message may use."),
			"id":               computedString("The agent's name."),
			"instructions":     computedString("The system prompt of the agent."),
			"mcp_servers": schema.ListNestedAttribute{
				MarkdownDescription: "MCP servers the agent may call; null when the agent lists none.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"allowed_tools":  computedStringList("Tools of the server the agent may call; null or empty means every tool."),
						"credential":     computedString("Name of the credential (declared in the harness's credentials file) the harness sends to the server."),
						"credential_env": computedString("The older form of `credential`: name of the harness's environment variable holding the server's token."),
						"name":           computedString("Name of the server."),
						"url":            computedString("The server's endpoint."),
					},
				},
			},
			"model": schema.SingleNestedAttribute{
				MarkdownDescription: "The model the agent runs on.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"api_key_credential": computedString("Name of the credential (declared in the harness's credentials file) the harness sends as the model API key."),
					"api_key_env":        computedString("The older form of `api_key_credential`: name of the harness's environment variable holding the model API key."),
					"base_url":           computedString("API endpoint, when not the provider's public API."),
					"name":               computedString("Model name."),
					"provider":           computedString("`openai`, `anthropic` or `scripted`."),
					"script":             computedString("The replay script of a `scripted` model."),
				},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the agent.",
				Required:            true,
				Validators:          []validator.String{validName()},
			},
			"owner": computedString("Who created the agent."),
			"sandbox": schema.SingleNestedAttribute{
				MarkdownDescription: "The agent's sandbox settings.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"approve_code":          computedBool("Whether every script and command waits for the session's user to approve it."),
					"archive_after_minutes": computedInt64("Minutes of inactivity after which a stopped sandbox is archived."),
					"delete_after_minutes":  computedInt64("Minutes of inactivity after which an archived sandbox is deleted."),
					"enabled":               computedBool("Whether the agent has a sandbox."),
					"environment":           computedString("The environment sandboxes are cloned from."),
					"environment_version":   computedString("The version of `environment` the agent's sandboxes are pinned to (a build hash or snapshot id); null when they follow the current one."),
					"extract_limits":        extractLimitsDataSchema(),
					"file_downloads":        computedBool("Whether users may download files the agent produces."),
					"idle_stop_minutes":     computedInt64("Minutes without a tool call after which the sandbox is stopped."),
				},
			},
			"skills": schema.ListNestedAttribute{
				MarkdownDescription: "Skills the agent can load into its sandbox; null when the agent lists none.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"description": computedString("The skill's description, from its `SKILL.md`."),
						"digest":      computedString("SHA-256 of the skill's files as published (`sha256:<hex>`)."),
						"name":        computedString("Name of the skill."),
						"path":        computedString("The skill's folder in the configuration that published it."),
					},
				},
			},
		},
	}
}
