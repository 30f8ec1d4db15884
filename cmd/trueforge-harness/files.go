package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/policy"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/sessions"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
	"github.com/trueforge/terraform-provider-trueforge/internal/sandbox"
	"github.com/trueforge/terraform-provider-trueforge/internal/store"
	"github.com/trueforge/terraform-provider-trueforge/internal/termsafe"
)

func newFilesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "files", Short: "List and download a session's files"}
	var listOut outputFormat
	list := g.sessionCmd("list SESSION", "List the files offered for download, and the sandbox workspace when it still has one (nothing is provisioned or resumed)", 1, func(ctx context.Context, cmd *cobra.Command, h *harness, s store.Session, args []string) error {
		doc, err := listFiles(ctx, h, s)
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		if listOut == outputJSON {
			return writeJSON(out, doc)
		}
		tw := newTable(out)
		fmt.Fprintln(tw, "OFFERED FILE\tSIZE\tSHA256\tCLASSIFICATION\tTYPE\tSCAN\tDOWNLOAD\tEXPIRES\tSNAPSHOT\tSOURCE EVENT\tCOMMANDS\tMANIFEST\tSESSION INSTALLS")
		for _, a := range doc.Offered {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t#%d\t%d\t%s\n", termsafe.Line(a.Path), a.Size, a.SHA256[:min(16, len(a.SHA256))], a.Classification,
				orDash(a.DetectedType), scanCell(a), downloadCell(a), a.ExpiresAt.Format(time.RFC3339), a.Snapshot, a.SourceEvent, len(a.Commands), lineageCells(a))
		}
		tw.Flush()
		for _, a := range doc.Offered {
			if a.Refusal != "" {
				fmt.Fprintf(out, "%s: not for you: %s\n", termsafe.Line(a.Path), termsafe.Line(a.Refusal))
			}
		}
		ws := doc.Workspace
		switch {
		case ws.Sandbox == "":
			fmt.Fprintln(out, "\nworkspace: no sandbox was ever provisioned for this session")
		case !ws.Listed:
			fmt.Fprintf(out, "\nworkspace of %s (%s): %s\n", ws.Sandbox, ws.State, ws.Reason)
		default:
			fmt.Fprintf(out, "\nworkspace of %s (%s):\n", ws.Sandbox, ws.State)
			for _, f := range ws.Files {
				fmt.Fprintf(out, "  %s\t%d\t%s\n", f.Mode, f.Size, termsafe.Line(f.Path))
			}
			if note := (sandbox.FileList{Omitted: ws.Omitted, OmittedAtLeast: ws.OmittedAtLeast}).OmittedNote(); note != "" {
				fmt.Fprintf(out, "  (%s)\n", note)
			}
		}
		return nil
	})
	addOutputFlag(list, &listOut, "")
	var dest, oldDest string
	get := g.sessionCmd("get SESSION PATH [--dest FILE]", "Download an offered file (digest re-checked), else read it from the session's sandbox", 2, func(ctx context.Context, cmd *cobra.Command, h *harness, s store.Session, args []string) error {
		data, err := fetchFile(ctx, cmd, h, s, args[1])
		if err != nil {
			return err
		}
		if dest == "" || dest == "-" {
			out, escaped := rawOut(cmd)
			if escaped {
				fmt.Fprintln(cmd.ErrOrStderr(), "stdout is a terminal: control characters are shown escaped; use --dest FILE or a redirect for the exact bytes")
			}
			_, err = out.Write(data)
			return err
		}
		return os.WriteFile(dest, data, 0o644)
	})
	get.PreRunE = func(cmd *cobra.Command, _ []string) error {
		if cmd.Flags().Changed("output") {
			return usageErrorf("files get: -o/--output no longer names the destination (-o picks an output format on list and show commands); use --dest %s", oldDest)
		}
		return nil
	}
	get.Flags().StringVar(&dest, "dest", "", "write to this file instead of stdout")
	// The old spelling, kept only to be refused with the new one named.
	get.Flags().StringVarP(&oldDest, "output", "o", "", "")
	_ = get.Flags().MarkHidden("output")
	cmd.AddCommand(list, get, newFilesReleaseCmd(g))
	return cmd
}

// fetchFile is the file at p of session s for files get, checked before it is handed
// out as the API checks a download: an offered file's expiry and digest, then whether
// its classification lets the caller have it (checkRecipient), its type and its scan
// (checkDownload); a file never offered is read from the sandbox, with the default
// classification.
func fetchFile(ctx context.Context, cmd *cobra.Command, h *harness, s store.Session, p string) ([]byte, error) {
	scanner, err := h.g.malwareScanner()
	if err != nil {
		return nil, err
	}
	pol, err := h.loadPolicy() // who may download each classification
	if err != nil {
		return nil, err
	}
	var data []byte
	// Offers are recorded under the cleaned path: look it up the same way, or
	// "./out.txt" would miss the offer (and its digest and expiry checks) and
	// fall through to whatever the sandbox holds now.
	a, err := h.store.GetArtifact(ctx, s.ID, tools.CleanPath(p))
	switch {
	case err == nil:
		if _, err := sessions.CheckOffer(a, time.Now(), 0); err != nil {
			return nil, err
		}
		if err := checkRecipient(ctx, h, pol, s, a); err != nil {
			return nil, err
		}
		if err := checkDownload(ctx, cmd, h, s, scanner, a.Path, true, a.SHA256, a.Content); err != nil {
			return nil, err
		}
		data = a.Content
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d bytes, sha256 %s verified, classified %s, from snapshot %s\n", termsafe.Line(a.Path), a.Size, a.SHA256, a.Classification, a.SnapshotID)
	case errors.Is(err, store.ErrNotFound):
		// Never offered: the default classification decides, as for the API.
		if err := checkRecipient(ctx, h, pol, s, store.Artifact{SessionID: s.ID, Path: p, Classification: tools.DefaultClassfication}); err != nil {
			return nil, err
		}
		// The path is the sandbox's name for a file: shown on one line, escaped, so
		// a newline in it cannot forge a line of the error or of stderr.
		name := termsafe.Line(p)
		rec, err := sessions.Sandbox(ctx, h.store, s.ID)
		if err != nil {
			return nil, fmt.Errorf("%s was not offered for download and session %s has no sandbox", name, s.ID)
		}
		rt, err := sessions.Runtime(ctx, h.store, h.runtimes, rec)
		if err != nil {
			return nil, err
		}
		// At most what an offer may hold, as the API serves a workspace file: a 10 GB
		// (sparse) file is refused from its size before a byte is read.
		if data, err = rt.ReadFile(ctx, rec.SandboxID, p, tools.MaxArtifactBytes); err != nil {
			return nil, fmt.Errorf("%s was not offered for download, and reading it from sandbox %s (%s) failed: %w", name, rec.SandboxID, rec.State, lineErr{err})
		}
		sum := sha256.Sum256(data)
		if err := checkDownload(ctx, cmd, h, s, scanner, p, false, hex.EncodeToString(sum[:]), data); err != nil {
			return nil, err
		}
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: read from sandbox %s (not an offered artifact: no recorded digest)\n", name, rec.SandboxID)
	default:
		return nil, err
	}
	return data, nil
}

// checkRecipient refuses a file the caller may not have by its classification
// (sessions.CheckRecipient, as the API decides, the operator's --policy saying who may
// download what; the decision on a confidential or restricted file goes to the audit
// log), saying who may and how to get it released.
func checkRecipient(ctx context.Context, h *harness, pol *policy.Policy, s store.Session, a store.Artifact) error {
	if _, err := sessions.CheckRecipient(ctx, h.store, pol, s, a, h.caller()); err != nil {
		return fmt.Errorf("%s was not handed out: %w", termsafe.Line(a.Path), err)
	}
	return nil
}

// newFilesReleaseCmd is `files release SESSION PATH --to USER`: an operator (whoever
// runs the CLI on the control plane's database, as for `users`) releases an offered
// file of any session to a user, or "*" for everyone who may see the session,
// whatever its classification allows: the way a restricted file reaches anyone. The
// release is recorded in the audit log (a release the log does not take is undone).
func newFilesReleaseCmd(g *globals) *cobra.Command {
	var to, note string
	release := g.storeCmd("release SESSION PATH --to USER [--note TEXT]", `Release an offered file to a user (or "*") whatever its classification allows; recorded in the audit log`,
		cobra.ExactArgs(2), func(ctx context.Context, cmd *cobra.Command, st *store.Store) error {
			id, p := cmd.Flags().Arg(0), tools.CleanPath(cmd.Flags().Arg(1))
			if to == "" {
				return usageErrorf(`files release: --to is required: the user the file is released to, or "*" for everyone who may see the session`)
			}
			if to != store.ReleaseToAll {
				if err := store.CheckUserName(to); err != nil {
					return usageErrorf("--to: %v, or \"*\" for everyone who may see the session", err)
				}
			}
			s, err := st.GetSession(ctx, id)
			if err != nil {
				return fmt.Errorf("session %s: %w (list sessions with `trueforge-harness sessions list`)", id, err)
			}
			a, err := st.GetArtifact(ctx, s.ID, p)
			if errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("%s was not offered for download in session %s, and only offered files are released (`trueforge-harness files list %s` lists them): %w",
					termsafe.Line(p), s.ID, s.ID, err)
			}
			if err != nil {
				return err
			}
			actor, err := g.identity(st)
			if err != nil {
				return err
			}
			if err := sessions.Release(ctx, st, s, a, to, actor, note, time.Now()); err != nil {
				return err
			}
			if _, err := st.GetUser(ctx, to); errors.Is(err, store.ErrNotFound) && to != store.ReleaseToAll && to != s.Owner {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: no API user is named %q yet (`trueforge-harness users list`): the release reaches the API once one is\n", to)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "released %s (sha256 %s, classified %s) of session %s to %s; recorded in the audit log\n",
				termsafe.Line(a.Path), a.SHA256, a.Classification, s.ID, to)
			return nil
		})
	release.Flags().StringVar(&to, "to", "", `the user the file is released to, or "*" for everyone who may see the session (required)`)
	release.Flags().StringVar(&note, "note", "", "why, for the audit log")
	return release
}

// lineErr is err shown on one line (termsafe.Line). The errors of the layers below may
// hold a sandbox's file name raw (an *fs.PathError's path), and a newline in it must
// not split the harness's error into a forged line of its own.
type lineErr struct{ err error }

func (e lineErr) Error() string { return termsafe.Line(e.err.Error()) }
func (e lineErr) Unwrap() error { return e.err }

// checkDownload checks a file before it is handed out, as the API does: what it is
// (sessions.CheckType: an executable, or an archive that may hold one, is refused unless
// --allow-executable-downloads), then, when --scanner is set, malware
// (sessions.CheckScan): a positive verdict refuses it and is recorded in the session's
// log (once per digest); a scanner without a verdict refuses it unless
// --scanner-fail-open, which hands it out with a warning.
func checkDownload(ctx context.Context, cmd *cobra.Command, h *harness, s store.Session, sc sessions.Scanner, p string, offered bool, sum string, data []byte) error {
	tc, err := sessions.CheckType(p, data, h.g.allowExecutables)
	if err != nil {
		return fmt.Errorf("%s was not handed out: %w; --allow-executable-downloads hands them out", termsafe.Line(p), err)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%s: type %s\n", termsafe.Line(p), termsafe.Line(tc.Header()))
	v, err := sessions.CheckScan(ctx, h.store, sc, h.g.scannerFailOpen, sum, data)
	switch {
	case errors.Is(err, sessions.ErrMalware):
		if err := sessions.RecordMalware(ctx, h.store, s.ID, p, offered, v); err != nil {
			h.logger.Error("recording malware_found", "session", s.ID, "path", p, "err", err)
		}
		return fmt.Errorf("%s was blocked: the malware scanner found %s (%s)", termsafe.Line(p), v.Signature, v.Scanner)
	case errors.Is(err, sessions.ErrScanUnavailable):
		return fmt.Errorf("%s was not handed out: it could not be scanned for malware (%w); --scanner-fail-open hands files out unscanned", termsafe.Line(p), err)
	case err != nil:
		return err
	case sc != nil && v.Scanner == "":
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s was not scanned for malware: the scanner gave no verdict and --scanner-fail-open is set\n", termsafe.Line(p))
	case sc != nil:
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: scanned clean (%s)\n", termsafe.Line(p), v.Scanner)
	}
	return nil
}

// scanCell is an offered file's malware scan as the table says it.
func scanCell(a offeredFileJSON) string {
	if a.Scan == sessions.ScanFound {
		return "FOUND " + termsafe.Line(a.ScanSignature)
	}
	return a.Scan
}

// downloadCell says whether the CLI's user may download the file (the reason follows
// the table).
func downloadCell(a offeredFileJSON) string {
	if a.MayDownload {
		return "yes"
	}
	return "refused"
}
