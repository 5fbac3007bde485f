#!/usr/bin/env bash
# The command line: --help lists every option and subcommand, each subcommand has --help,
# --print-config prints a spec that loads again to the same values, usage errors exit 2.
set -u
bin=$1 src=$2
# shellcheck source=check_common.bash
source "$src/test/integration/check_common.bash"

check "--help" 0 "$bin" --help
for opt in --config --set --print-config --plan-only --topology --format --resume --nproc-per-node \
           discover bench export sample prepare-data report; do
  has "--help" "$opt"
done
for sub in discover bench export sample prepare-data report; do
  check "$sub --help" 0 "$bin" "$sub" --help
  has "$sub --help" "Usage:"
done
check "--version" 0 "$bin" --version
has "--version" "holmes-train"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
check "--print-config" 0 "$bin" --print-config --set train.steps=7 --set parallel.partition=[3,1] --set parallel.pipeline=2
has "--print-config" "steps: 7"
has "--print-config" "# --set"
printf '%s\n' "$out" > "$tmp/resolved.yaml"
check "re-load printed config" 0 "$bin" --config "$tmp/resolved.yaml" --print-config
has "re-load printed config" "partition: [3, 1]"
has "re-load printed config" "steps: 7"

check "unknown subcommand option" 2 "$bin" discover --no-such-flag
check "bad --format" 2 "$bin" --plan-only --format xml
check "--nproc-per-node 0" 2 "$bin" --nproc-per-node 0
[ "$fail" -eq 0 ] && echo "cli: all checks passed"
exit "$fail"
