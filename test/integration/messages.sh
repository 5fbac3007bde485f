#!/usr/bin/env bash
# Messages a new user meets, tried on a scratch folder: every usage error and bad value exits
# with 2 and one message that starts "holmes-train: error: ", says what was seen and what is
# accepted, with readable numbers. Numeric options and the options of training are taken from
# --help, so an option added later is tried too. Usage: messages.sh <holmes-train> <source dir>
set -u
bin=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
export OMP_NUM_THREADS=1
# shellcheck source=check_common.bash
source "$src/test/integration/check_common.bash"
# usage_error DESCRIPTION COMMAND...: exit 2, the message starts with the prefix, no number
# of 16 or more digits (CLI11 printed the limits of a double as 309 digits).
usage_error() {
  local what=$1; shift
  check "$what" 2 "$@"
  [[ $out == "holmes-train: error: "* ]] || { echo "FAIL $what: no 'holmes-train: error:' prefix"; show_out; fail=1; }
  if grep -qE '[0-9]{16,}' <<<"$out"; then echo "FAIL $what: unreadable number"; show_out; fail=1; fi
}

subcommands=(discover bench export eval sample prepare-data report)
# Arguments that satisfy each subcommand's required options (the files need not exist: the
# command line is checked before any is read).
declare -A required=([discover]="" [bench]="" [export]="--checkpoint ck --out ex" [eval]="--checkpoint ck --tokens t.bin"
                     [sample]="--checkpoint ck" [prepare-data]="--input a.txt --out a.bin" [report]="run")

# 1. Every numeric option of every command (from --help: "--steps INT >= 1"): a word, a far
# out-of-range number and an overflowing one each get the value seen and the accepted range.
numeric=0
for sub in "" "${subcommands[@]}"; do
  args=""
  [ -n "$sub" ] && args="$sub ${required[$sub]}"
  # shellcheck disable=SC2086
  opts=$("$bin" $sub --help | grep -oE -- '--[a-z0-9-]+ (INT|UINT|FLOAT)' | cut -d' ' -f1)
  for opt in $opts; do
    numeric=$((numeric + 1))
    for value in abc -99999999 1e999; do
      # shellcheck disable=SC2086
      usage_error "$sub $opt $value" "$bin" $args "$opt" "$value"
      has "$sub $opt $value" "$value"
      has "$sub $opt $value" "accepted: "
    done
  done
done
[ "$numeric" -ge 9 ] || { echo "FAIL: found only $numeric numeric options in --help"; fail=1; }
usage_error "sample --max-tokens 0" "$bin" sample --checkpoint ck --max-tokens 0
has "sample --max-tokens 0" "sample: --max-tokens: 0 is out of range; accepted: an integer >= 1"
usage_error "bench --steps 0" "$bin" bench --steps 0
has "bench --steps 0" "bench: --steps: 0 is out of range; accepted: an integer >= 1"
usage_error "sample --temperature 101" "$bin" sample --checkpoint ck --temperature 101
has "sample --temperature 101" "accepted: a number in [0, 100]"
usage_error "--format xml" "$bin" --plan-only --format xml
has "--format xml" "--format: 'xml' is not accepted; accepted: text, json, html"

# 2. CLI11's own parse errors: unknown options and arguments, missing ones, missing values.
usage_error "unknown option" "$bin" discover --no-such-flag
has "unknown option" "discover: unknown option '--no-such-flag'; accepted options of 'holmes-train discover': "
has "unknown option" "--sysfs-root"
usage_error "misspelled option" "$bin" bench --stpes 5
has "misspelled option" "bench: unknown option '--stpes' (did you mean '--steps'?)"
usage_error "option of training after a subcommand" "$bin" bench --plan-only
has "option of training after a subcommand" "'--plan-only' is an option of holmes-train without a subcommand, not of 'bench'"
usage_error "unknown subcommand" "$bin" trian
has "unknown subcommand" "unexpected argument 'trian'"
has "unknown subcommand" "accepted subcommands: discover, bench, export, eval, sample, prepare-data, report"
usage_error "missing required" "$bin" eval --tokens t.bin
has "missing required" "eval: missing --checkpoint DIR ("
usage_error "missing value" "$bin" bench --steps
has "missing value" "bench: --steps needs a value; accepted: INT >= 1 (Timed steps after the warm-up (default 20))"
usage_error "a value for a flag" "$bin" --print-config=maybe
has "a value for a flag" "--print-config: 'maybe' is not accepted; accepted: the flag alone (or =true / =false)"
usage_error "one value, given twice" "$bin" --plan-only --format json --format text
has "one value, given twice" "--format was given 2 values; accepted: one"
usage_error "a job-spec key as an option" "$bin" --micro-batch 4
has "a job-spec key as an option" "unknown option '--micro-batch' (the job-spec key train.micro_batch is set with --set train.micro_batch=VALUE)"
usage_error "a subcommand's option without it" "$bin" --steps 5
has "a subcommand's option without it" "unknown option '--steps' (an option of 'holmes-train bench')"

# 3. Options of training where they have no effect: with a subcommand (every option --help
# lists, with a value it accepts), and --format without --plan-only.
declare -A value=([--config]=job.yaml [--set]=train.steps=1 [--print-config]="" [--plan-only]="" [--topology]=t.yaml
                  [--format]=json [--resume]=auto [--weights-only]="" [--overwrite]="" [--nproc-per-node]=2 [--nodes]="node[0-1]" [--max-restarts]=1
                  [--init-from]=hf-dir)
train_opts=$("$bin" --help | sed -n '/^Options:/,/^Subcommands:/p' | grep -oE -- '--[a-z0-9-]+' | sort -u)
for opt in $train_opts; do
  [ "$opt" = --help ] || [ "$opt" = --version ] && continue
  [ -n "${value[$opt]+set}" ] || { echo "FAIL: $opt is new: give it a value in messages.sh"; fail=1; continue; }
  for sub in "${subcommands[@]}"; do
    # shellcheck disable=SC2086
    usage_error "$opt with $sub" "$bin" "$opt" ${value[$opt]} "$sub" ${required[$sub]}
    has "$opt with $sub" "error: $opt${value[$opt]:+ ${value[$opt]}} is an option of holmes-train without a subcommand and has no effect on '$sub'"
  done
done
usage_error "--config before bench" "$bin" --config job.yaml bench
has "--config before bench" "give it after the subcommand: holmes-train bench --config job.yaml"
usage_error "--format without --plan-only" "$bin" --format json
has "--format without --plan-only" "--format json has no effect on a training run; accepted only with --plan-only"
usage_error "--format with --print-config" "$bin" --format text --print-config
has "--format with --print-config" "--format text has no effect on --print-config; accepted only with --plan-only"
usage_error "--nproc-per-node with --print-config" "$bin" --nproc-per-node 2 --print-config
has "--nproc-per-node with --print-config" "accepted only with training runs and --plan-only"
usage_error "--print-config with --plan-only" "$bin" --print-config --plan-only
has "--print-config with --plan-only" "--print-config and --plan-only were both given"

# 4. Flags that stand for spec keys are named as the origin of their values.
usage_error "--weights-only without a checkpoint" "$bin" --weights-only
has "--weights-only without a checkpoint" "--weights-only: checkpoint.weights_only:"
has "--weights-only without a checkpoint" "checkpoint.resume = none (default)"
lacks "--weights-only without a checkpoint" "--set"
check "flags in --print-config" 0 "$bin" --resume auto --overwrite --print-config
grep -qE '^  resume: auto +# --resume$' <<<"$out" || { echo "FAIL --resume in --print-config"; fail=1; }
grep -qE '^  overwrite: true +# --overwrite$' <<<"$out" || { echo "FAIL --overwrite in --print-config"; fail=1; }

# 5. A pipeline degree implied by parallel.partition: --print-config names the partition's line.
printf 'model:\n  layers: 4\n  hidden: 32\n  heads: 2\ntrain:\n  steps: 1\nparallel:\n  pipeline: auto\n  partition: [3, 1]\n' >part.yaml
check "implied pipeline" 0 "$bin" --config part.yaml --print-config
line=$(grep -E '^  pipeline: 2 ' <<<"$out")
[[ $line == *"# part.yaml:9 (from parallel.partition)" ]] || { echo "FAIL implied pipeline: '$line'"; fail=1; }

# 6. A topology file with several problems: all of them, each with file:line:column, key,
# the value seen and the accepted range (a negative rate included).
cat >topo.yaml <<'EOF'
nodes:
  - names: n[1-2]
    devices: {kind: cpu, count: 0}
    nics:
      - {kind: ib, rate_gbps: -5}
      - {kind: ethernet, speed: 10}
EOF
for how in "--plan-only --topology topo.yaml" "--plan-only --set cluster.topology=topo.yaml" \
           "--topology topo.yaml --set job.output_dir=topo-run"; do
  # shellcheck disable=SC2086
  usage_error "topology ($how)" "$bin" $how
  has "topology ($how)" "invalid topology (3 problems):"
  has "topology ($how)" "topo.yaml:3:33: nodes[0].devices.count: expected a whole number >= 1, found 0"
  has "topology ($how)" "topo.yaml:5:31: nodes[0].nics[0].rate_gbps: expected a number of Gb/s > 0 or ~ (unknown), found -5"
  has "topology ($how)" "topo.yaml:6:26: nodes[0].nics[1].speed: unknown key 'speed'; accepted: "
done

# 7. Token files: an llm.c file whose magic is damaged, read with format auto, by training and
# by eval; eval on a file too short for one batch.
python3 - <<'PY'
import struct
header = [12345, 1, 300] + [0] * 253          # llm.c's layout, wrong magic
open("damaged.bin", "wb").write(struct.pack("<256i", *header) + struct.pack("<300H", *([65] * 300)))
PY
usage_error "damaged llm.c file in training" "$bin" --set data.source=files --set data.train=damaged.bin --set train.steps=1
for frag in "damaged.bin: format auto recognises no token format" "the header is not llm.c's: it starts with 12345" \
            "llm.c's layout (version 1, 300 tokens" "tried raw-uint16: token id 12345 at position 0"; do
  has "damaged llm.c file in training" "$frag"
done
lacks "damaged llm.c file in training" "was the file made with another tokenizer"
tiny=(--set model.layers=1 --set model.hidden=16 --set model.heads=1 --set model.max_seq_len=16 --set train.seq_len=16
      --set train.micro_batch=1 --set train.global_batch=1 --set cluster.device_tflops=1 --set log.interval=1000
      --set train.eval_interval=0 --set job.output_dir=run)
check "tiny training run" 0 "$bin" "${tiny[@]}" --set train.steps=1
printf 'hi' >short.txt
check "prepare-data" 0 "$bin" prepare-data --input short.txt --out short.bin
usage_error "eval on a short file" "$bin" eval --checkpoint run/final --tokens short.bin
has "eval on a short file" "--tokens short.bin: 3 tokens = 0 sequences of 16+1 tokens, fewer than one batch of --batch-size 4"
has "eval on a short file" "accepted: a longer token file, a shorter --seq-len (now 16)"
lacks "eval on a short file" "1..0"
usage_error "eval, damaged file" "$bin" eval --checkpoint run/final --tokens damaged.bin
has "eval, damaged file" "tried llmc: the header is not llm.c's"

[ "$fail" -eq 0 ] && echo "messages: all checks passed ($numeric numeric options)"
exit "$fail"
