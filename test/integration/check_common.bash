# Shared by cli.sh and messages.sh: run a command, check its exit code and its output.
# Source it after `set -u`; failures set $fail to 1.
fail=0
show_out() { sed 's/^/    /' <<<"$out"; }
check() {  # check DESCRIPTION EXPECTED_CODE COMMAND...; output kept in $out
  local what=$1 want=$2; shift 2
  out=$("$@" 2>&1); local code=$?
  if [ "$code" -ne "$want" ]; then echo "FAIL $what: exit $code, expected $want"; show_out; fail=1; fi
}
has() {  # has DESCRIPTION FRAGMENT (in $out)
  grep -qF -- "$2" <<<"$out" || { echo "FAIL $1: output lacks '$2'"; show_out; fail=1; }
}
lacks() {  # lacks DESCRIPTION FRAGMENT (in $out)
  ! grep -qF -- "$2" <<<"$out" || { echo "FAIL $1: output has '$2'"; show_out; fail=1; }
}
