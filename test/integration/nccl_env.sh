#!/usr/bin/env bash
# A multi-process CUDA job started with NCCL_NET set is refused with exit 2 before anything
# starts (NCCL_NET would override the per-group network, docs/comm.md), under the local
# launcher and as a torchrun-style rank; without it, on a machine without a GPU, the job gets
# the usual job.device message.
set -u
bin=$(readlink -f "$1") src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
fail=0
say_fail() { echo "FAIL $*"; fail=$((fail + 1)); }

expect_refusal() {  # name, what the message must contain, command...
  local name=$1 want=$2
  shift 2
  "$@" --set job.device=cuda --set job.output_dir="$tmp/out-$name" >"$tmp/$name.out" 2>&1
  local rc=$?
  [ $rc -eq 2 ] || say_fail "$name: exit $rc, expected 2"
  grep -qF "$want" "$tmp/$name.out" || { say_fail "$name: no '$want' in:"; cat "$tmp/$name.out"; }
  [ ! -e "$tmp/out-$name" ] || say_fail "$name: wrote $tmp/out-$name before refusing"
}

expect_refusal local "NCCL_NET='IB' is set" env NCCL_NET=IB "$bin" --nproc-per-node 2
expect_refusal rank "NCCL_NET='Socket' is set" env NCCL_NET=Socket RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 \
  LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1 "$bin"
expect_refusal plain "job.device: 'cuda'" env -u NCCL_NET "$bin" --nproc-per-node 2

# The IB + RoCE batch script at least parses.
bash -n "$src/scripts/slurm/train_ib_roce.sbatch" || say_fail "train_ib_roce.sbatch: syntax"

[ $fail -eq 0 ] && echo "nccl_env: all cases passed"
exit $((fail > 0))
