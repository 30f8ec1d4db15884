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
		fmt.Fprintln(tw, "OFFERED FILE\tSIZE\tSHA256\tCLASSIFICATION\tEXPIRES\tSNAPSHOT\tSOURCE EVENT\tCOMMANDS\tMANIFEST\tSESSION INSTALLS")
		for _, a := range doc.Offered {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t#%d\t%d\t%s\n", termsafe.Line(a.Path), a.Size, a.SHA256[:min(16, len(a.SHA256))], a.Classification,
				a.ExpiresAt.Format(time.RFC3339), a.Snapshot, a.SourceEvent, len(a.Commands), lineageCells(a))
		}
		tw.Flush()
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
		scanner, err := g.malwareScanner()
		if err != nil {
			return err
		}
		var data []byte
		// Offers are recorded under the cleaned path: look it up the same way, or
		// "./out.txt" would miss the offer (and its digest and expiry checks) and
		// fall through to whatever the sandbox holds now.
		a, err := h.store.GetArtifact(ctx, s.ID, tools.CleanPath(args[1]))
		switch {
		case err == nil:
			if _, err := sessions.CheckOffer(a, time.Now(), 0); err != nil {
				return err
			}
			if err := checkDownload(ctx, cmd, h, s, scanner, a.Path, true, a.SHA256, a.Content); err != nil {
				return err
			}
			data = a.Content
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: %d bytes, sha256 %s verified, classified %s, from snapshot %s\n", termsafe.Line(a.Path), a.Size, a.SHA256, a.Classification, a.SnapshotID)
		case errors.Is(err, store.ErrNotFound):
			// The path is the sandbox's name for a file: shown on one line, escaped, so
			// a newline in it cannot forge a line of the error or of stderr.
			name := termsafe.Line(args[1])
			rec, err := sessions.Sandbox(ctx, h.store, s.ID)
			if err != nil {
				return fmt.Errorf("%s was not offered for download and session %s has no sandbox", name, s.ID)
			}
			rt, err := sessions.Runtime(ctx, h.store, h.runtimes, rec)
			if err != nil {
				return err
			}
			// At most what an offer may hold, as the API serves a workspace file: a 10 GB
			// (sparse) file is refused from its size before a byte is read.
			if data, err = rt.ReadFile(ctx, rec.SandboxID, args[1], tools.MaxArtifactBytes); err != nil {
				return fmt.Errorf("%s was not offered for download, and reading it from sandbox %s (%s) failed: %w", name, rec.SandboxID, rec.State, lineErr{err})
			}
			sum := sha256.Sum256(data)
			if err := checkDownload(ctx, cmd, h, s, scanner, args[1], false, hex.EncodeToString(sum[:]), data); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "%s: read from sandbox %s (not an offered artifact: no recorded digest)\n", name, rec.SandboxID)
		default:
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
	cmd.AddCommand(list, get)
	return cmd
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
