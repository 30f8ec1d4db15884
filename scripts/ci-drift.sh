#!/usr/bin/env bash
# Drift check for CI: plans the Terraform configuration in the current directory against
# the control plane it names, and fails when the plan is not empty, naming every resource
# that changed outside Terraform and every resource the plan would change, with the
# attributes concerned (names only: values, which may be secrets, are never printed).
#
#   scripts/ci-drift.sh [extra plan arguments]
#
# Exit status: 0 no drift, 2 drift or pending changes (listed on standard output),
# 1 the plan failed. The CLI is $TF (default: terraform; set TF=tofu for OpenTofu); the
# saved plan is written to $DRIFT_PLAN (default: drift.tfplan) for a later step to
# upload or apply. Needs jq. See docs/guides/ci.md.
set -uo pipefail
tf="${TF:-terraform}"
plan="${DRIFT_PLAN:-drift.tfplan}"

"$tf" plan -detailed-exitcode -input=false -lock=false -no-color -out="$plan" "$@"
code=$?
case $code in
0)
	echo "drift: none, the control plane matches the configuration and state"
	exit 0
	;;
2) ;;
*)
	echo "drift: the plan failed (exit $code)" >&2
	exit 1
	;;
esac

echo
echo "drift: the control plane does not match the configuration:"
# changed lists the top-level attributes whose values differ between before and after,
# or that the plan leaves unknown until apply.
"$tf" show -json -no-color "$plan" | jq -r '
  def changed:
    (.before // {}) as $b | (.after // {}) as $a | (.after_unknown // {}) as $u
    | [($b | keys[]), ($a | keys[])] | unique
    | map(select($b[.] != $a[.] or $u[.] == true));
  def describe(what):
    .address + ": " + what + " ("
      + (if .change.actions == ["delete"] and .change.after == null then "gone"
         elif .change.actions == ["create"] then "missing"
         else (.change | changed | join(", ")) end)
      + ")";
  ((.resource_drift // [])[]
     | describe("changed outside Terraform")),
  ((.resource_changes // [])[]
     | select(.change.actions != ["no-op"] and .change.actions != ["read"])
     | describe("plan: " + (.change.actions | join("+"))))
' || {
	echo "drift: could not read the saved plan $plan" >&2
	exit 1
}
exit 2
