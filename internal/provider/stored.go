package provider

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/trueforge/terraform-provider-trueforge/internal/store"
)

// The CRUD steps that the resources known by name share, each a store row of one kind
// ("Registry", "Sandbox Provider": Title Case, as in a diagnostic's summary; the detail
// names it in lower case).

// readNamed starts a Read: it records the identity of the object whose id (its name) is
// id and fetches its row with get. ok is false when Read has nothing more to do: the
// row is gone (the resource leaves the state, so that the plan creates it again) or
// reading it failed ("Error Reading <kind>").
func readNamed[T any](ctx context.Context, kind string, id types.String, get func(context.Context, string) (T, error), resp *resource.ReadResponse) (T, bool) {
	setNameIdentity(ctx, resp.Identity, id, &resp.Diagnostics)
	row, err := get(ctx, id.ValueString())
	if errors.Is(err, store.ErrNotFound) {
		resp.State.RemoveResource(ctx)
		return row, false
	}
	if err != nil {
		addOperationError(&resp.Diagnostics, "Error Reading "+kind, fmt.Sprintf("%s %q", strings.ToLower(kind), id.ValueString()), err)
		return row, false
	}
	return row, true
}

// ownedNamed starts an Update or a Delete (verb "changed" or "deleted"): the row named
// name, fetched with get, if its owner (ownerOf) is this control plane's. ok is false
// when the caller has nothing more to do: an error was added, or the row of a delete
// is already gone (deleting what is gone succeeds).
func ownedNamed[T any](ctx context.Context, cp *controlPlane, kind, name, verb string, get func(context.Context, string) (T, error),
	ownerOf func(T) string, diags *diag.Diagnostics) (T, bool) {
	row, err := get(ctx, name)
	if verb == "deleted" && errors.Is(err, store.ErrNotFound) {
		return row, false
	}
	if err != nil {
		addOperationError(diags, "Error Reading "+kind, fmt.Sprintf("%s %q", strings.ToLower(kind), name), err)
		return row, false
	}
	if owner := ownerOf(row); owner != cp.owner {
		cp.addOwnerError(diags, kind, name, owner, verb)
		return row, false
	}
	return row, true
}

// readRemote fetches, with get, the backend object (id is the backend's id of it, title
// the backend's name) of the row named name; nil when the backend has none. ok is false
// when the backend could not tell ("Error Reading <title> <kind>").
func readRemote[R any](ctx context.Context, kind, title, name, id string, get func(context.Context, string) (*R, error), diags *diag.Diagnostics) (*R, bool) {
	remote, err := get(ctx, id)
	if err != nil {
		diags.AddError(fmt.Sprintf("Error Reading %s %s", title, kind), fmt.Sprintf("%s %q (%s id %q): %s", kind, name, title, id, err))
		return nil, false
	}
	return remote, true
}

// backedKind is a kind of row whose object lives in a sandbox backend too, and that
// environments name (a registry, a volume): what its plan and its Delete need to say.
type backedKind struct {
	kind      string                                                        // Title Case: "Registry"
	owner     func(*store.Store, context.Context, string) (string, error)   // the owner of the row named
	deleteRow func(*store.Store, context.Context, string) error             // the store's delete, store.ErrInUse while environments name it
	users     func(*store.Store, context.Context, string) ([]string, error) // the environments that name it
	usedAs    string                                                        // how they name it: "<kind> %q is <usedAs> environment(s) ..."
	stillUsed string                                                        // the summary of the plan's warning that they still do
	planNext  string                                                        // what the plan's warning says next
	fix       string                                                        // what to do about them first: "Change those environments' registry"
	again     string                                                        // what to do when the backend refused the delete: "Apply again."
}

// ownerBy is backedKind.owner from the store's get of the row and its owner field.
func ownerBy[T any](get func(*store.Store, context.Context, string) (T, error), ownerOf func(T) string) func(*store.Store, context.Context, string) (string, error) {
	return func(st *store.Store, ctx context.Context, name string) (string, error) {
		row, err := get(st, ctx, name)
		return ownerOf(row), err
	}
}

// refuseOthers refuses at plan the change or delete (verb) of the row named name when
// it exists and another owner's: apply would refuse it.
func (k backedKind) refuseOthers(ctx context.Context, cp *controlPlane, name, verb string, diags *diag.Diagnostics) bool {
	owner, err := k.owner(cp.store, ctx, name)
	if err != nil || owner == cp.owner {
		return false
	}
	cp.addOwnerError(diags, k.kind, name, owner, verb)
	return true
}

// planDelete is the plan of the delete of the row whose name is in state: refused for
// another owner's, and warned about while environments still name it (unless the same
// apply changes them first, the delete fails).
func (k backedKind) planDelete(ctx context.Context, cp *controlPlane, state tfsdk.State, diags *diag.Diagnostics) {
	var name types.String
	diags.Append(state.GetAttribute(ctx, path.Root("name"), &name)...)
	if k.refuseOthers(ctx, cp, name.ValueString(), "deleted", diags) {
		return
	}
	if users, err := k.users(cp.store, ctx, name.ValueString()); err == nil && len(users) > 0 {
		diags.AddWarning(k.stillUsed, fmt.Sprintf("%s %q is %s environment(s) %s. %s", k.kind, name.ValueString(), k.usedAs, strings.Join(users, ", "), k.planNext))
	}
}

// delete deletes the row named name first, in the transaction that checks no
// environment names it, then its backend object (title is the backend's name) with
// deleteRemote; when the backend fails, putBack restores the row, so that the object
// stays known and a later apply deletes it. A delete with a timeout (not 0) that ran
// out says so. ok is false when an error was added.
func (k backedKind) delete(ctx context.Context, cp *controlPlane, name, title string, timeout time.Duration, deleteRemote, putBack func(context.Context) error, diags *diag.Diagnostics) bool {
	err := k.deleteRow(cp.store, ctx, name)
	if errors.Is(err, store.ErrInUse) {
		users, _ := k.users(cp.store, ctx, name)
		diags.AddError(k.kind+" In Use",
			fmt.Sprintf("%s %q cannot be deleted: it is %s environment(s) %s. %s (and apply), then delete it. Nothing was deleted.",
				k.kind, name, k.usedAs, strings.Join(users, ", "), k.fix))
		return false
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		addOperationError(diags, "Error Deleting "+k.kind, fmt.Sprintf("%s %q", strings.ToLower(k.kind), name), err)
		return false
	}
	derr := deleteRemote(ctx)
	if derr == nil {
		return true
	}
	_ = putBack(context.WithoutCancel(ctx))
	if timeout != 0 && timedOut(ctx, derr) {
		addTimeoutError(diags, "Timed Out Deleting "+k.kind, "delete", timeout,
			fmt.Sprintf("Deleting %s %q in %s", strings.ToLower(k.kind), name, title), "It is kept in trueforge. Raise timeouts.delete and run the command again.", derr)
		return false
	}
	diags.AddError(fmt.Sprintf("Error Deleting %s %s", title, k.kind),
		fmt.Sprintf("%s %q could not be deleted in %s; it is kept in trueforge. %s\n\nOriginal Error: %s", k.kind, name, title, k.again, derr))
	return false
}

// lookupNamed is a data source's fetch, with get, of the row named name that its
// configuration looks up at the attribute at (kind in Title Case, as in the summaries).
// ok is false when an error was added: there is none ("<kind> Not Found" on at;
// notFound says what to check), or it could not be read.
func lookupNamed[T any](ctx context.Context, kind string, at path.Path, name string, get func(context.Context, string) (T, error), notFound string, diags *diag.Diagnostics) (T, bool) {
	row, err := get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		diags.AddAttributeError(at, kind+" Not Found", notFound)
		return row, false
	}
	if err != nil {
		diags.AddError("Error Reading "+kind, fmt.Sprintf("%s %q could not be read.\n\nOriginal Error: %s", kind, name, err))
		return row, false
	}
	return row, true
}
