package main

import (
	"context"
	"errors"
	"fmt"
	"mime"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/trueforge/terraform-provider-trueforge/internal/harness/attachments"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/events"
	"github.com/trueforge/terraform-provider-trueforge/internal/harness/tools"
)

// attachFlags are run's and chat's --attach and --classification.
type attachFlags struct {
	files          []string
	classification string
}

func (a *attachFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&a.files, "attach", nil,
		"attach this file to the (first) message, repeatable: stored with its digest, written to /workspace/attachments/ when a tool first needs the sandbox")
	cmd.Flags().StringVar(&a.classification, "classification", "", "the classification of the --attach files: untrusted (default), internal, confidential, restricted or public")
}

// openFiles are the --attach files, open, in the order given.
type openFiles []*os.File

// open opens every --attach file before anything else happens, so a missing or
// unreadable one is a usage error that creates no session.
func (a *attachFlags) open() (openFiles, error) {
	if c := a.classification; c != "" && !slices.Contains(tools.Classifications, c) {
		return nil, usageErrorf("--classification %q: use one of %s", c, strings.Join(tools.Classifications, ", "))
	}
	var out openFiles
	for _, name := range a.files {
		f, err := os.Open(name)
		if err == nil {
			var fi os.FileInfo
			if fi, err = f.Stat(); err == nil && !fi.Mode().IsRegular() {
				err = errors.New("not a regular file")
			}
			if err != nil {
				_ = f.Close()
			}
		}
		if err != nil {
			out.close()
			return nil, usageErrorf("--attach %s: %v", name, err)
		}
		out = append(out, f)
	}
	return out, nil
}

func (fs openFiles) close() {
	for _, f := range fs {
		_ = f.Close()
	}
}

// store keeps the files as attachments of session id, uploaded by user, and returns
// them as the first message carries them.
func (fs openFiles) store(ctx context.Context, svc *attachments.Service, id, user, classification string) ([]events.Attachment, error) {
	var out []events.Attachment
	for _, f := range fs {
		up := attachments.Upload{Name: filepath.Base(f.Name()), DeclaredType: mime.TypeByExtension(filepath.Ext(f.Name())),
			Classification: classification, Uploader: user}
		if mt, _, err := mime.ParseMediaType(up.DeclaredType); err == nil {
			up.DeclaredType = mt
		}
		a, err := svc.Put(ctx, id, up, f)
		if err != nil {
			return nil, fmt.Errorf("--attach %s: %w", f.Name(), err)
		}
		out = append(out, attachments.Event(a))
	}
	return out, nil
}
