package api

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// EnvironmentCard is one row of the web page's Environments page: an environment as
// the product documents describe the page (build status, resources, networking, when
// it was last updated), with its secrets' names, never their values, its versions and
// its warm pool.
type EnvironmentCard struct {
	Name            string `json:"name"`
	Owner           string `json:"owner"`
	Reserved        bool   `json:"reserved"`
	SandboxProvider string `json:"sandbox_provider"`
	// Status is the build status of its snapshot: Building, Ready or Failed (NoSnapshot
	// or SnapshotMissing when there is none to ask); StatusReason says why it failed.
	Status       string            `json:"status"`
	StatusReason string            `json:"status_reason,omitempty"`
	SnapshotID   string            `json:"snapshot_id"`
	Image        string            `json:"image"`
	Resources    CardResources     `json:"resources"`
	Network      CardNetwork       `json:"network"`
	EnvNames     []string          `json:"env_names"` // its environment variables' names (values are not shown)
	Secrets      []CardSecret      `json:"secrets"`
	UpdatedAt    time.Time         `json:"updated_at"`
	Versions     []CardVersion     `json:"versions"`
	WarmPool     *CardWarmPool     `json:"warm_pool"`
	Labels       map[string]string `json:"labels,omitempty"`
}

// CardResources are what each sandbox of the environment gets.
type CardResources struct {
	CPU      int64  `json:"cpu"`
	MemoryGB int64  `json:"memory_gb"`
	DiskGB   int64  `json:"disk_gb"`
	GPU      int64  `json:"gpu,omitempty"`
	GPUType  string `json:"gpu_type,omitempty"`
}

// CardNetwork is the environment's network policy; Summary says it in one line.
type CardNetwork struct {
	BlockAll     bool     `json:"block_all"`
	AllowDomains []string `json:"allow_domains"`
	AllowCIDRs   []string `json:"allow_cidrs"`
	Summary      string   `json:"summary"`
}

// CardSecret is a secret's name and where its value may go; the value is never read.
type CardSecret struct {
	Name      string    `json:"name"`
	Hosts     []string  `json:"hosts"`
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
	// Inert: block_all is on, which ignores secrets.
	Inert bool `json:"inert"`
}

// CardVersion is one snapshot the environment has used.
type CardVersion struct {
	SnapshotID   string     `json:"snapshot_id"`
	BuildHash    string     `json:"build_hash"`
	Current      bool       `json:"current"`
	Kept         bool       `json:"kept"`
	CurrentSince time.Time  `json:"current_since"`
	CurrentUntil *time.Time `json:"current_until"`
	PinnedBy     []string   `json:"pinned_by"`
}

// CardWarmPool is the environment's warm pool: its configuration and its members now.
type CardWarmPool struct {
	Size          int64 `json:"size"`
	MaxAgeSeconds int64 `json:"max_age_seconds"`
	Ready         int64 `json:"ready"`
	Creating      int64 `json:"creating"`
}

// networkSummary says an environment's network policy as the page shows it.
func networkSummary(e store.Environment) string {
	switch {
	case e.BlockAll:
		return "Block all network (allow list and secrets ignored)"
	case len(e.AllowDomains) == 0 && len(e.Settings.AllowCIDRs) == 0:
		return "Unrestricted egress"
	}
	parts := append(slices.Clone(e.AllowDomains), e.Settings.AllowCIDRs...)
	return "Allow list: " + strings.Join(parts, ", ")
}

// environmentsVisible decides which environments caller sees on the Environments page.
// An admin sees all. A user sees, as ownership says: the environments it owns (a
// user's name is the owner its sessions and applies write), those its own agents
// reference, those shared with it or with everyone, and the reserved default.
func (s *Server) environmentsVisible(ctx context.Context, c *caller, envs []store.Environment) ([]store.Environment, error) {
	if c.user.Admin {
		return envs, nil
	}
	mine, err := s.cfg.Store.EnvironmentsOfOwner(ctx, c.user.Name)
	if err != nil {
		return nil, err
	}
	out := envs[:0:0]
	for _, e := range envs {
		if e.Reserved || e.Owner == c.user.Name || slices.Contains(mine, e.Name) ||
			slices.Contains(e.SharedWith, c.user.Name) || slices.Contains(e.SharedWith, "*") {
			out = append(out, e)
		}
	}
	return out, nil
}

// environmentsOverview lists the environments the caller sees, each as a card of the
// Environments page.
func (s *Server) environmentsOverview(w http.ResponseWriter, r *http.Request, c *caller) error {
	ctx := r.Context()
	all, err := s.cfg.Store.ListEnvironments(ctx)
	if err != nil {
		return err
	}
	envs, err := s.environmentsVisible(ctx, c, all)
	if err != nil {
		return err
	}
	updated, err := s.cfg.Store.EnvironmentsUpdatedAt(ctx)
	if err != nil {
		return err
	}
	pool, err := s.cfg.Store.ListPoolSandboxes(ctx)
	if err != nil {
		return err
	}
	// The reserved default first, then the rest by name, as the product's page lists them.
	slices.SortStableFunc(envs, func(a, b store.Environment) int {
		if a.Reserved != b.Reserved {
			if a.Reserved {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	out := make([]EnvironmentCard, 0, len(envs))
	for _, e := range envs {
		card, err := s.card(ctx, e, updated[e.Name], pool)
		if err != nil {
			return err
		}
		out = append(out, card)
	}
	writeJSON(w, http.StatusOK, map[string]any{"environments": out})
	return nil
}

func (s *Server) card(ctx context.Context, e store.Environment, updated time.Time, pool []store.PoolSandbox) (EnvironmentCard, error) {
	c := EnvironmentCard{Name: e.Name, Owner: e.Owner, Reserved: e.Reserved, SandboxProvider: e.Provider, SnapshotID: e.SnapshotID,
		Image: e.Image, UpdatedAt: updated.UTC(), Labels: e.Settings.Labels,
		Resources: CardResources{CPU: e.CPU, MemoryGB: e.MemoryGB, DiskGB: e.DiskGB, GPU: e.Settings.GPU, GPUType: e.Settings.GPUType},
		Network: CardNetwork{BlockAll: e.BlockAll, AllowDomains: nonNilStrings(e.AllowDomains), AllowCIDRs: nonNilStrings(e.Settings.AllowCIDRs),
			Summary: networkSummary(e)},
		EnvNames: slices.Sorted(maps.Keys(e.Env)), Secrets: []CardSecret{}, Versions: []CardVersion{}}
	if c.EnvNames == nil {
		c.EnvNames = []string{}
	}
	c.Status = "NoSnapshot"
	if e.SnapshotID != "" {
		snap, err := s.cfg.Store.GetSnapshot(ctx, e.SnapshotID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			c.Status = "SnapshotMissing"
		case err != nil:
			return c, err
		default:
			c.Status, c.StatusReason = snap.Status, snap.Reason
		}
	}
	secrets, err := s.cfg.Store.SecretNames(ctx, e.Name)
	if err != nil {
		return c, err
	}
	for _, sec := range secrets {
		c.Secrets = append(c.Secrets, CardSecret{Name: sec.EnvName, Hosts: nonNilStrings(sec.Hosts), Version: sec.Version,
			UpdatedAt: sec.UpdatedAt.UTC(), Inert: e.BlockAll})
	}
	versions, err := s.cfg.Store.EnvironmentVersions(ctx, e.Name)
	if err != nil {
		return c, err
	}
	for _, v := range versions {
		cv := CardVersion{SnapshotID: v.SnapshotID, BuildHash: v.BuildHash, Current: v.Current, Kept: v.Kept,
			CurrentSince: v.CurrentSince.UTC(), PinnedBy: nonNilStrings(v.PinnedBy)}
		if !v.CurrentUntil.IsZero() {
			t := v.CurrentUntil.UTC()
			cv.CurrentUntil = &t
		}
		c.Versions = append(c.Versions, cv)
	}
	if wp := e.Settings.WarmPool; wp != nil {
		c.WarmPool = &CardWarmPool{Size: wp.Size, MaxAgeSeconds: wp.MaxAgeSeconds}
		for _, p := range pool {
			switch {
			case p.Environment != e.Name:
			case p.State == store.PoolReady:
				c.WarmPool.Ready++
			case p.State == store.PoolCreating:
				c.WarmPool.Creating++
			}
		}
	}
	return c, nil
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
