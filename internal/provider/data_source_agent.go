package provider

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

var (
	_ datasource.DataSource              = (*agentDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*agentDataSource)(nil)
)

type agentDataSource struct {
	cp *controlPlane
}

// NewAgentDataSource is the trueforge_agent data source.
func NewAgentDataSource() datasource.DataSource { return &agentDataSource{} }

func (d *agentDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_agent"
}

func (d *agentDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Reads a published agent by name: its model, instructions, MCP servers, skills and sandbox settings, as the harness runs it.",
		Attributes: map[string]schema.Attribute{
			"code_mode": schema.BoolAttribute{
				MarkdownDescription: "Whether Code Mode is on (scripts in the sandbox call MCP tools through the harness).",
				Computed:            true,
			},
			"description": schema.StringAttribute{
				MarkdownDescription: "What the agent is for.",
				Computed:            true,
			},
			"max_turns": schema.Int64Attribute{
				MarkdownDescription: "Model steps the harness allows for one user message.",
				Computed:            true,
			},
			"code_mode_limits": codeModeLimitsDataSchema(),
			"token_budget": schema.Int64Attribute{
				MarkdownDescription: "Tokens (input plus output) one user message may use.",
				Computed:            true,
			},
			"id": schema.StringAttribute{
				MarkdownDescription: "The agent's name.",
				Computed:            true,
			},
			"instructions": schema.StringAttribute{
				MarkdownDescription: "The system prompt of the agent.",
				Computed:            true,
			},
			"mcp_servers": schema.ListNestedAttribute{
				MarkdownDescription: "MCP servers the agent may call; null when the agent lists none.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"allowed_tools": schema.ListAttribute{
							MarkdownDescription: "Tools of the server the agent may call; null or empty means every tool.",
							Computed:            true,
							ElementType:         types.StringType,
						},
						"credential": schema.StringAttribute{
							MarkdownDescription: "Name of the credential (declared in the harness's credentials file) the harness sends to the server.",
							Computed:            true,
						},
						"credential_env": schema.StringAttribute{
							MarkdownDescription: "The older form of `credential`: name of the harness's environment variable holding the server's token.",
							Computed:            true,
						},
						"name": schema.StringAttribute{
							MarkdownDescription: "Name of the server.",
							Computed:            true,
						},
						"url": schema.StringAttribute{
							MarkdownDescription: "The server's endpoint.",
							Computed:            true,
						},
					},
				},
			},
			"model": schema.SingleNestedAttribute{
				MarkdownDescription: "The model the agent runs on.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"api_key_credential": schema.StringAttribute{
						MarkdownDescription: "Name of the credential (declared in the harness's credentials file) the harness sends as the model API key.",
						Computed:            true,
					},
					"api_key_env": schema.StringAttribute{
						MarkdownDescription: "The older form of `api_key_credential`: name of the harness's environment variable holding the model API key.",
						Computed:            true,
					},
					"base_url": schema.StringAttribute{
						MarkdownDescription: "API endpoint, when not the provider's public API.",
						Computed:            true,
					},
					"name": schema.StringAttribute{
						MarkdownDescription: "Model name.",
						Computed:            true,
					},
					"provider": schema.StringAttribute{
						MarkdownDescription: "`openai`, `anthropic` or `scripted`.",
						Computed:            true,
					},
					"script": schema.StringAttribute{
						MarkdownDescription: "The replay script of a `scripted` model.",
						Computed:            true,
					},
				},
			},
			"name": schema.StringAttribute{
				MarkdownDescription: "Name of the agent.",
				Required:            true,
				Validators:          []validator.String{validName()},
			},
			"owner": schema.StringAttribute{
				MarkdownDescription: "Who created the agent.",
				Computed:            true,
			},
			"sandbox": schema.SingleNestedAttribute{
				MarkdownDescription: "The agent's sandbox settings.",
				Computed:            true,
				Attributes: map[string]schema.Attribute{
					"archive_after_minutes": schema.Int64Attribute{
						MarkdownDescription: "Minutes of inactivity after which a stopped sandbox is archived.",
						Computed:            true,
					},
					"delete_after_minutes": schema.Int64Attribute{
						MarkdownDescription: "Minutes of inactivity after which an archived sandbox is deleted.",
						Computed:            true,
					},
					"enabled": schema.BoolAttribute{
						MarkdownDescription: "Whether the agent has a sandbox.",
						Computed:            true,
					},
					"environment": schema.StringAttribute{
						MarkdownDescription: "The environment sandboxes are cloned from.",
						Computed:            true,
					},
					"file_downloads": schema.BoolAttribute{
						MarkdownDescription: "Whether users may download files the agent produces.",
						Computed:            true,
					},
					"idle_stop_minutes": schema.Int64Attribute{
						MarkdownDescription: "Minutes without a tool call after which the sandbox is stopped.",
						Computed:            true,
					},
				},
			},
			"skills": schema.ListNestedAttribute{
				MarkdownDescription: "Skills the agent can load into its sandbox; null when the agent lists none.",
				Computed:            true,
				NestedObject: schema.NestedAttributeObject{
					Attributes: map[string]schema.Attribute{
						"description": schema.StringAttribute{
							MarkdownDescription: "The skill's description, from its `SKILL.md`.",
							Computed:            true,
						},
						"digest": schema.StringAttribute{
							MarkdownDescription: "SHA-256 of the skill's files as published (`sha256:<hex>`).",
							Computed:            true,
						},
						"name": schema.StringAttribute{
							MarkdownDescription: "Name of the skill.",
							Computed:            true,
						},
						"path": schema.StringAttribute{
							MarkdownDescription: "The skill's folder in the configuration that published it.",
							Computed:            true,
						},
					},
				},
			},
		},
	}
}

func (d *agentDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.cp = configureControlPlane(req.ProviderData, &resp.Diagnostics)
}

func (d *agentDataSource) Read(ctx context.Context, req datasource.ReadRequest, resp *datasource.ReadResponse) {
	m, ok := decode[agentModel](ctx, d.cp, req.Config.Get, &resp.Diagnostics)
	if !ok {
		return
	}
	name := m.Name.ValueString()
	a, err := d.cp.store.GetAgent(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		resp.Diagnostics.AddAttributeError(path.Root("name"), "Agent Not Found",
			fmt.Sprintf("No agent %q exists in this control plane. Check the name; an agent created in the same configuration "+
				"should be referenced by its trueforge_agent resource's name so Terraform creates it first.", name))
		return
	}
	if err != nil {
		resp.Diagnostics.AddError("Error Reading Agent", fmt.Sprintf("Agent %q could not be read.\n\nOriginal Error: %s", name, err))
		return
	}
	resp.Diagnostics.Append(m.fromStore(ctx, a)...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &m)...)
}
