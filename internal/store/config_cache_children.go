package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// A sandbox provider's volumes and registries are read by the config cache in the same
// statement as the providers, as one JSON array each per provider row, so that caching
// them costs no statement of its own: a no-op plan's cost stays a fixed number of
// statements (configLoadQueries) however many tables the configuration has. A
// registry's sealed password travels hex-encoded.

func childrenSelect(d dialect) string {
	if d == postgres {
		return `SELECT name, type, api_url, target, api_key_enc, scopes, release_snapshot, status, owner, require_limits,
	COALESCE((SELECT json_agg(json_build_array(v.name, v.owner, v.remote_id, v.size, v.shared_with) ORDER BY v.name) FROM volumes v WHERE v.provider = p.name), '[]')::text,
	COALESCE((SELECT json_agg(json_build_array(r.name, r.owner, r.url, r.username, encode(r.password_enc, 'hex'), r.project, r.remote_id, r.version) ORDER BY r.name)
		FROM registries r WHERE r.provider = p.name), '[]')::text
FROM sandbox_providers p`
	}
	return `SELECT name, type, api_url, target, api_key_enc, scopes, release_snapshot, status, owner, require_limits,
	(SELECT json_group_array(json_array(v.name, v.owner, v.remote_id, v.size, v.shared_with)) FROM (SELECT * FROM volumes WHERE provider = p.name ORDER BY name) v),
	(SELECT json_group_array(json_array(r.name, r.owner, r.url, r.username, hex(r.password_enc), r.project, r.remote_id, r.version))
		FROM (SELECT * FROM registries WHERE provider = p.name ORDER BY name) r)
FROM sandbox_providers p`
}

// selectProvidersWithChildren reads every provider with its volumes and registries.
func selectProvidersWithChildren(ctx context.Context, q querier, d dialect) ([]SandboxProvider, []Volume, []Registry, error) {
	rows, err := q.QueryContext(ctx, childrenSelect(d))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("reading the configuration: %w", err)
	}
	defer rows.Close()
	var (
		providers []SandboxProvider
		volumes   []Volume
		regs      []Registry
	)
	for rows.Next() {
		var vols, rs string
		var sc scanFunc = func(dest ...any) error { return rows.Scan(append(dest, &vols, &rs)...) }
		p, err := scanProvider(sc)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("reading the configuration: %w", err)
		}
		providers = append(providers, p)
		vrows, err := childRows(vols, 5, "volumes", p.Name)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, r := range vrows {
			size, _ := r[3].(float64)
			volumes = append(volumes, Volume{Name: str(r[0]), Provider: p.Name, Owner: str(r[1]), RemoteID: str(r[2]),
				SizeGB: int64(size), SharedWith: decodeSharedWith(str(r[4]))})
		}
		rrows, err := childRows(rs, 8, "registries", p.Name)
		if err != nil {
			return nil, nil, nil, err
		}
		for _, r := range rrows {
			enc, err := hex.DecodeString(str(r[4]))
			if err != nil {
				return nil, nil, nil, fmt.Errorf("reading registry %q: %w", str(r[0]), err)
			}
			version, _ := r[7].(float64)
			regs = append(regs, Registry{
				Name: str(r[0]), Provider: p.Name, Owner: str(r[1]), URL: str(r[2]), Username: str(r[3]), PasswordEnc: enc,
				Project: str(r[5]), RemoteID: str(r[6]), Version: int64(version),
			})
		}
	}
	return providers, volumes, regs, rows.Err()
}

// childRows decodes the JSON array of a provider's children (its volumes or registries,
// what) that childrenSelect aggregates, each child an array of width values.
func childRows(doc string, width int, what, provider string) ([][]any, error) {
	var rows [][]any
	if err := json.Unmarshal([]byte(doc), &rows); err != nil {
		return nil, fmt.Errorf("reading the %s of sandbox provider %q: %w", what, provider, err)
	}
	for _, r := range rows {
		if len(r) != width {
			return nil, fmt.Errorf("reading the %s of sandbox provider %q: a row of %d values", what, provider, len(r))
		}
	}
	return rows, nil
}

// scanFunc adapts a function to the Scan interface the scan helpers take.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

func str(v any) string {
	s, _ := v.(string)
	return s
}

func (c *configSnapshot) volume(name string) (Volume, error) {
	for _, v := range c.volumes {
		if v.Name == name {
			return v, nil
		}
	}
	return Volume{}, notFound("volume %q", name)
}

func (c *configSnapshot) registry(name string) (Registry, error) {
	for _, r := range c.registries {
		if r.Name == name {
			r.PasswordEnc = append([]byte(nil), r.PasswordEnc...)
			return r, nil
		}
	}
	return Registry{}, notFound("registry %q", name)
}
