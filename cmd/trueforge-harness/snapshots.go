package main

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/manifest"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

func newSnapshotsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "snapshots", Short: "Show what a snapshot contains, and find what an advisory affects"}
	var showOut outputFormat
	var sbom bool
	show := g.harnessCmd("show SNAPSHOT|ENVIRONMENT [--sbom]", "Show a snapshot's package manifest (an environment's name shows its current snapshot's); --sbom prints it as CycloneDX 1.5 JSON", cobra.ExactArgs(1), func(ctx context.Context, cmd *cobra.Command, h *harness, args []string) error {
		sm, err := snapshotManifest(ctx, h.store, args[0])
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if sbom {
			b, err := manifest.CycloneDX(sm.Manifest, sm.SnapshotID)
			if err != nil {
				return err
			}
			_, err = out.Write(b)
			return err
		}
		doc := manifestDoc(sm)
		if showOut == outputJSON {
			return writeJSON(out, doc)
		}
		fmt.Fprintf(out, "snapshot  %s\ndigest    %s\npackages  %d (%s)", doc.SnapshotID, doc.Digest, len(doc.Packages), countsLine(doc.Counts))
		if doc.Omitted > 0 {
			fmt.Fprintf(out, ", %d more left out (the manifest's size cap)", doc.Omitted)
		}
		fmt.Fprintf(out, "\nsize      %d bytes, read in %d ms\n", doc.Bytes, doc.ExtractMS)
		if doc.Distro != "" {
			fmt.Fprintf(out, "distro    %s %s\n", doc.Distro, doc.DistroVersion)
		}
		fmt.Fprintf(out, "sources   %s\n\n", strings.Join(doc.Sources, ", "))
		tw := newTable(out)
		fmt.Fprintln(tw, "ECOSYSTEM\tNAME\tVERSION\tARCH")
		for _, p := range doc.Packages {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Ecosystem, p.Name, p.Version, p.Arch)
		}
		return tw.Flush()
	})
	show.Flags().BoolVar(&sbom, "sbom", false, "print the manifest as a CycloneDX 1.5 JSON SBOM")
	addOutputFlag(show, &showOut, "")

	var affOut outputFormat
	var allOwners bool
	affected := &cobra.Command{
		Use:   "affected PACKAGE[@RANGE]",
		Short: "List the snapshots, environments, sessions and artifacts whose packages include an affected version (a store lookup; no network)",
		Long: "PACKAGE may start with an ecosystem (deb:, apk:, pypi:, npm:). RANGE is an exact version or comparisons joined by\n" +
			"commas: pypi:requests@<2.32, openssl@>=3.0,<3.0.14, npm:@types/node@20.1.0. Versions compare as Debian's do\n" +
			"(numeric runs numerically, an epoch first, ~ before everything), PyPI and npm pre-releases before their release.\n" +
			"Artifacts are found through their snapshot and through packages their session installed before the offer.\n" +
			"Sessions and artifacts are yours (--owner) unless --all-owners is given; snapshots and environments are shared.",
		Args: cobra.ExactArgs(1),
		RunE: g.withHarness(func(ctx context.Context, cmd *cobra.Command, h *harness, args []string) error {
			q, err := manifest.ParseQuery(args[0])
			if err != nil {
				return usageErrorf("%v", err)
			}
			aff, err := h.store.AffectedBy(ctx, q)
			if err != nil {
				return err
			}
			if !allOwners {
				aff = ownedBy(aff, h.me)
			}
			doc := affectedDoc(aff)
			out := cmd.OutOrStdout()
			if affOut == outputJSON {
				return writeJSON(out, doc)
			}
			if len(doc.Snapshots)+len(doc.Artifacts) == 0 {
				fmt.Fprintf(out, "no snapshot or artifact holds %s\n", doc.Query)
				return nil
			}
			tw := newTable(out)
			fmt.Fprintln(tw, "KIND\tID\tDETAIL")
			for _, s := range doc.Snapshots {
				fmt.Fprintf(tw, "snapshot\t%s\t%s\n", s.ID, packagesLine(s.Packages))
			}
			for _, e := range doc.Environments {
				when := "uses"
				if !e.Current {
					when = "used"
				}
				fmt.Fprintf(tw, "environment\t%s\t%s %s\n", e.Name, when, e.SnapshotID)
			}
			for _, s := range doc.Sessions {
				fmt.Fprintf(tw, "session\t%s\towner %s, via %s (snapshot %s)\n", s.ID, s.Owner, s.Via, s.SnapshotID)
			}
			for _, a := range doc.Artifacts {
				fmt.Fprintf(tw, "artifact\t%s\tsession %s, %s, sha256 %s, via %s: %s\n", a.ID, a.SessionID, a.Path, a.SHA256[:min(16, len(a.SHA256))], a.Via, packagesLine(a.Packages))
			}
			return tw.Flush()
		}),
	}
	affected.Flags().BoolVar(&allOwners, "all-owners", false,
		"list every owner's sessions and artifacts (an operator's view, to invalidate a whole team's results), not only yours")
	addOutputFlag(affected, &affOut, "")
	cmd.AddCommand(show, affected)
	return cmd
}

// snapshotManifest reads the manifest of a snapshot, or of an environment's snapshot.
func snapshotManifest(ctx context.Context, st *store.Store, ref string) (store.SnapshotManifest, error) {
	id := ref
	if _, err := st.GetSnapshot(ctx, ref); errors.Is(err, store.ErrNotFound) {
		env, eerr := st.GetEnvironment(ctx, ref)
		if eerr != nil {
			return store.SnapshotManifest{}, fmt.Errorf("no snapshot or environment is named %q (list environments with `trueforge-harness environments list`)", ref)
		}
		id = env.SnapshotID
	} else if err != nil {
		return store.SnapshotManifest{}, err
	}
	sm, err := st.GetSnapshotManifest(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return sm, fmt.Errorf("snapshot %s has no manifest yet: it is recorded when its build turns Ready; for a snapshot built before manifests existed, or whose extraction failed, read it once with the trueforge_snapshot_manifest data source, which takes it", id)
	}
	return sm, err
}

// manifestJSON is `snapshots show -o json` (schema in the supply-chain guide).
type manifestJSON struct {
	SnapshotID    string         `json:"snapshot_id"`
	Digest        string         `json:"digest"`
	Bytes         int64          `json:"bytes"`
	ExtractMS     int64          `json:"extract_ms"`
	Omitted       int            `json:"omitted"`
	Distro        string         `json:"distro"`
	DistroVersion string         `json:"distro_version"`
	Sources       []string       `json:"sources"`
	Counts        map[string]int `json:"counts"`
	Packages      []packageJSON  `json:"packages"`
}

type packageJSON struct {
	Ecosystem string `json:"ecosystem"`
	Name      string `json:"name"`
	Version   string `json:"version"`
	Arch      string `json:"arch,omitempty"`
	PURL      string `json:"purl,omitempty"`
}

func manifestDoc(sm store.SnapshotManifest) manifestJSON {
	m := sm.Manifest
	doc := manifestJSON{SnapshotID: sm.SnapshotID, Digest: sm.Digest, Bytes: sm.Bytes, ExtractMS: sm.Extract.Milliseconds(), Omitted: m.Omitted,
		Distro: m.Distro, DistroVersion: m.DistroVersion, Sources: append([]string{}, m.Sources...), Counts: m.Counts(), Packages: []packageJSON{}}
	for _, p := range m.Packages {
		doc.Packages = append(doc.Packages, packageJSON{Ecosystem: p.Ecosystem, Name: p.Name, Version: p.Version, Arch: p.Arch, PURL: manifest.PURL(m, p)})
	}
	return doc
}

func countsLine(c map[string]int) string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, c[k])
	}
	return strings.Join(parts, ", ")
}

func packagesLine(ps []packageJSON) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.Ecosystem + ":" + p.Name + "@" + p.Version
	}
	return strings.Join(parts, ", ")
}

func packagesOf(ps []manifest.Package) []packageJSON {
	out := make([]packageJSON, len(ps))
	for i, p := range ps {
		out[i] = packageJSON{Ecosystem: p.Ecosystem, Name: p.Name, Version: p.Version, Arch: p.Arch}
	}
	return out
}

// affectedJSON is `snapshots affected -o json`.
type affectedJSON struct {
	Query        string                    `json:"query"`
	Snapshots    []affectedSnapshotJSON    `json:"snapshots"`
	Environments []affectedEnvironmentJSON `json:"environments"`
	Sessions     []affectedSessionJSON     `json:"sessions"`
	Artifacts    []affectedArtifactJSON    `json:"artifacts"`
}

type affectedSnapshotJSON struct {
	ID       string        `json:"id"`
	Packages []packageJSON `json:"packages"`
}

type affectedEnvironmentJSON struct {
	Name       string `json:"name"`
	SnapshotID string `json:"snapshot_id"`
	Current    bool   `json:"current"`
}

type affectedSessionJSON struct {
	ID         string `json:"id"`
	Owner      string `json:"owner"`
	SnapshotID string `json:"snapshot_id"`
	Via        string `json:"via"`
}

type affectedArtifactJSON struct {
	ID         string        `json:"id"`
	SessionID  string        `json:"session_id"`
	Path       string        `json:"path"`
	SHA256     string        `json:"sha256"`
	SnapshotID string        `json:"snapshot_id"`
	Via        string        `json:"via"`
	Packages   []packageJSON `json:"packages"`
}

func affectedDoc(a store.Affected) affectedJSON {
	doc := affectedJSON{Query: a.Query, Snapshots: []affectedSnapshotJSON{}, Environments: []affectedEnvironmentJSON{},
		Sessions: []affectedSessionJSON{}, Artifacts: []affectedArtifactJSON{}}
	for _, s := range a.Snapshots {
		doc.Snapshots = append(doc.Snapshots, affectedSnapshotJSON{ID: s.ID, Packages: packagesOf(s.Packages)})
	}
	for _, e := range a.Environments {
		doc.Environments = append(doc.Environments, affectedEnvironmentJSON{Name: e.Name, SnapshotID: e.SnapshotID, Current: e.Current})
	}
	for _, s := range a.Sessions {
		doc.Sessions = append(doc.Sessions, affectedSessionJSON{ID: s.ID, Owner: s.Owner, SnapshotID: s.SnapshotID, Via: s.Via})
	}
	for _, x := range a.Artifacts {
		doc.Artifacts = append(doc.Artifacts, affectedArtifactJSON{ID: x.ID, SessionID: x.SessionID, Path: x.Path, SHA256: x.SHA256,
			SnapshotID: x.SnapshotID, Via: x.Via, Packages: packagesOf(x.Packages)})
	}
	return doc
}

// lineageCells are the MANIFEST and SESSION INSTALLS cells of `files list`: the
// manifest digest (shortened) and the packages the session installed, "-" for none.
func lineageCells(a offeredFileJSON) string {
	digest := "-"
	if a.ManifestDigest != "" {
		digest = a.ManifestDigest[:min(len("sha256:")+12, len(a.ManifestDigest))]
	}
	installs := "-"
	if len(a.SessionInstalls) > 0 {
		installs = packagesLine(a.SessionInstalls)
	}
	return digest + "\t" + installs
}

// ownedBy keeps the sessions and artifacts of owner: like sessions list, the advisory
// query shows a caller its own work unless asked for everyone's.
func ownedBy(a store.Affected, owner string) store.Affected {
	sessions := a.Sessions[:0:0]
	for _, s := range a.Sessions {
		if s.Owner == owner {
			sessions = append(sessions, s)
		}
	}
	artifacts := a.Artifacts[:0:0]
	for _, x := range a.Artifacts {
		if x.Owner == owner {
			artifacts = append(artifacts, x)
		}
	}
	a.Sessions, a.Artifacts = sessions, artifacts
	return a
}
