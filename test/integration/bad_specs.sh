#!/usr/bin/env bash
# Every bad job spec in test/fixtures/bad_specs must make holmes-train exit with code 2 and
# print each message fragment its header lists. A case is NAME.yaml (run with --config NAME.yaml)
# or NAME.expect (no file; `# args:` gives the command line). Header lines:
#   # args: <command-line arguments>       (default: --config NAME.yaml)
#   # expect: <fragment that stderr must contain>   (one or more)
set -u
bin=$1 src=$2
dir=$src/test/fixtures/bad_specs
cd "$dir" || exit 1
fail=0 count=0
for case in *.yaml *.expect; do
  [ -e "$case" ] || continue
  name=${case%.*}
  if [ "$case" != "${name}.yaml" ] && [ -e "${name}.yaml" ]; then continue; fi  # .expect beside a .yaml
  header=$case
  [ -e "${name}.expect" ] && header=${name}.expect
  args=$(sed -n 's/^# args: //p' "$header")
  [ -n "$args" ] || args="--config $case"
  count=$((count + 1))
  # shellcheck disable=SC2086
  err=$(timeout 30 "$bin" $args --print-config 2>&1 >/dev/null)
  code=$?
  if [ "$code" -ne 2 ]; then
    echo "FAIL $case: exit code $code, expected 2"; echo "$err" | sed 's/^/    /'; fail=$((fail + 1)); continue
  fi
  while IFS= read -r frag; do
    if ! grep -qF -- "$frag" <<<"$err"; then
      echo "FAIL $case: message lacks: $frag"; echo "$err" | sed 's/^/    /'; fail=$((fail + 1))
    fi
  done < <(sed -n 's/^# expect: //p' "$header")
done
echo "bad specs: $count cases, $fail failures"
[ "$count" -ge 15 ] || { echo "FAIL: expected at least 15 bad-spec cases"; exit 1; }
[ "$fail" -eq 0 ]
