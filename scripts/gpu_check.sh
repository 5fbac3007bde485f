#!/usr/bin/env bash
# The GPU check, in two halves, because the GPU machine reaches no package registry:
#
#   scripts/gpu_check.sh bundle [DIR]   here (no GPU needed): builds the CUDA backend for sm_90
#                                       and gathers holmes-train, test_cuda and the GEMM bench
#                                       with the shared libraries a plain CUDA image lacks into
#                                       DIR (default gpu-bundle/, ignored by git, < 64 MiB)
#   scripts/gpu_check.sh run [DIR]      there (on the GPU machine, DIR carried): every CUDA test
#                                       (a skip is a failure there), the NCCL groups on the one
#                                       GPU (libnccl from the image), the whole-model checks, the
#                                       bench on GPT-2 124M (bf16, fp32, bf16 with the fallback
#                                       attention) and 350M (bf16), B=16 T=1024, and on a 1.2B
#                                       Llama (16 layers, hidden 2048, 32/8 heads, T=2048, bf16);
#                                       the llama rows (op parity, whole model vs the CPU); the
#                                       parity table and a short summary last; logs under $OUT
#
#   scripts/gpu_check.sh mask [DIR]     there: issue 52's rows (document masking on the cudnn
#                                       attention method, bf16): test_cuda "[document_mask]" (the
#                                       bias kernel bit for bit; each masked cuDNN graph cuDNN serves
#                                       against the CPU twin and each document alone, aligned and
#                                       odd T, GQA; plan(document_mask) taking cudnn; the fallback
#                                       and exact methods and a whole masked GPT-2 / Llama in fp32),
#                                       the form cuDNN took; a masked bf16 GPT-2 (T 256) trained 30 steps
#                                       on cudnn and on the fallback, every loss within 2e-2. `run`
#                                       runs the same tests (its "document mask" line) too
#
#   scripts/gpu_check.sh profile [DIR]  there: the kernels of one 124M bf16 step, each timed by
#                                       Nsight Compute, summed per kernel name, largest first
#
#   scripts/gpu_check.sh fp8 [DIR]      there: the rows of issue 51 (FP8): the FP8 parity tables
#                                       (casts, GEMMs, the linear layer against the CPU twins);
#                                       a 1.24B Llama trained in bf16 and in fp8 for the same
#                                       steps on real text (the bundle's corpus, byte tokens):
#                                       tokens/s ratio and validation losses; the bench of GPT-2
#                                       124M / 350M in bf16 and fp8 (MFU by the project's formula
#                                       and llm.c's 6N + 6LTC); then the ncu profile of the 124M
#                                       bf16 step (and nsys's, where the image has a working one).
#                                       Each row skipped once HOLMES_CHECK_BUDGET_S (default 480)
#                                       have passed; HOLMES_FP8_STEPS (default 150) sets the runs
#
#   scripts/gpu_check.sh extra [DIR]    there: the rows of issues 26 and 28 (device memory per
#                                       recompute mode against the plan; zb-h1 and interleaved
#                                       on layouts sharing the GPU; diloco against the CPU; the
#                                       largest GPT-2 / Llama the planner fits, timed), each
#                                       skipped once HOLMES_CHECK_BUDGET_S (default 400) have
#                                       passed; HOLMES_EXTRA_ONLY="key ..." picks rows
#
#   scripts/gpu_check.sh plan [DIR]     there: issue 54's rows. `holmes-train calibrate` on the GPU
#                                       for each model (micro-batches the bench does not run), then
#                                       --plan-only with that file against `bench` for six cases
#                                       (GPT-2 124M and 350M, Llama 1.2B and 3B, micro-batch 1 to
#                                       16, recompute none and full; the error per row, the target
#                                       5%); the tensor-parallel slice's row where two GPUs are
#                                       there; two workers calibrating NCCL groups on the one GPU;
#                                       a cluster.calibrate job's probe over the NCCL training
#                                       groups of two workers sharing the GPU (its file: device kind
#                                       cuda, versions, intra-node figures)
#
# With the device tool: run `bundle` here, then run(command="scripts/gpu_check.sh run",
# carry=["gpu-bundle"]). Env: HOLMES_JOBS (build jobs), HOLMES_CUDA_ARCHITECTURES (default 90),
# HOLMES_BENCH_STEPS (default 10).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
dir=${2:-gpu-bundle}

bundle() {
  # HOLMES_GPU_BUILD=build reuses scripts/setup.sh's build folder (Release, sm_90 by default)
  local build=${HOLMES_GPU_BUILD:-build-gpu}
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOLMES_CUDA=ON \
    -DHOLMES_CUDA_ARCHITECTURES="${HOLMES_CUDA_ARCHITECTURES:-90}" >/dev/null
  cmake --build "$build" -j "${HOLMES_JOBS:-2}" --target holmes-train test_cuda holmes_gemm_bench
  rm -rf "$dir"
  mkdir -p "$dir/bin" "$dir/lib"
  cp "$build/holmes-train" "$build/test/test_cuda" "$build/cuda/holmes_gemm_bench" "$dir/bin/"
  # Every library the binaries load, except the C runtime and the driver, which any CUDA
  # image has (libcuda comes from the driver; cuBLASLt is opened at run time from the image).
  local skip='^(linux-vdso|ld-linux|libc\.|libm\.|libdl\.|librt\.|libpthread\.|libcuda\.)'
  for bin in "$dir"/bin/*; do
    ldd "$bin" | awk '/=> \// { print $1, $3 }' | while read -r name path; do
      [[ $name =~ $skip ]] && continue
      cp -L -n "$path" "$dir/lib/$name"
    done
  done
  text_corpus "$dir/data"
  local size
  size=$(du -sm "$dir" | cut -f1)
  echo "gpu_check: bundle $dir: $(ls "$dir/lib" | wc -l) libraries, ${size} MiB"
  [ "$size" -lt 64 ] || { echo "gpu_check: the bundle is ${size} MiB, over the 64 MiB that can travel" >&2; exit 1; }
}

# The real text of the FP8 rows, into $1: the distinct text files of this machine's licenses
# and package documentation (READMEs, NEWS, changelogs, copyright files; gzip'ed ones
# unpacked; binary files and duplicates skipped), in path order, up to 8 MB; the last 5% held
# out for validation. Carried gzip'ed (the GPU machine reaches no corpus) and tokenized there
# as bytes (prepare-data --tokenizer bytes).
text_corpus() {
  mkdir -p "$1"
  python3 - "$1" <<'PY'
import gzip, hashlib, os, re, sys
out, limit, seen, parts, size = sys.argv[1], 8_000_000, set(), [], 0
name = re.compile(r"(\.txt|\.md|^README.*|^NEWS.*|^changelog.*|^copyright)(\.gz)?$")
paths = sorted(os.path.join(d, f) for root in ("/usr/share/common-licenses", "/usr/share/doc")
               for d, _, files in os.walk(root) for f in files if name.search(f))
for p in paths:
    if size >= limit:
        break
    try:
        data = gzip.open(p).read() if p.endswith(".gz") else open(p, "rb").read()
    except OSError:
        continue
    digest = hashlib.md5(data).digest()
    if b"\0" in data or digest in seen:  # binary, or a copy of a file already taken
        continue
    seen.add(digest)
    parts.append(data)
    size += len(data)
text = b"".join(parts)[:limit]
cut = len(text) * 95 // 100
for fname, chunk in (("train.txt.gz", text[:cut]), ("valid.txt.gz", text[cut:])):
    with gzip.open(os.path.join(out, fname), "wb", compresslevel=9) as f:
        f.write(chunk)
print(f"gpu_check: text corpus {len(text) // 1000} kB from {len(parts)} distinct files, "
      f"{cut // 1000} kB for training, {(len(text) - cut) // 1000} kB held out")
PY
}

# The directory of the first file called $1 under the places a CUDA image keeps libraries
# (the toolkit, and the nvidia-* wheels of its Python environment), or nothing.
find_lib_dir() {
  local hit
  hit=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local /usr/lib /opt /root /home /workspace \
    -name "$1" \( -type f -o -type l \) 2>/dev/null | head -1)
  [ -n "$hit" ] && dirname "$hit"
  return 0
}

# One bench row: name, precision and the model's L C NH; extra env (e.g. HOLMES_ATTENTION) may
# precede the call.
bench_row() {
  local name=$1 precision=$2 L=$3 C=$4 NH=$5 steps=${HOLMES_BENCH_STEPS:-10} log line info
  log="$logs/bench_${name}_${precision}${HOLMES_ATTENTION:+_$HOLMES_ATTENTION}.log"
  timeout 120 "$dir/bin/holmes-train" bench --steps "$steps" --set job.device=cuda --set train.precision="$precision" \
    --set model.layers="$L" --set model.hidden="$C" --set model.heads="$NH" --set model.vocab_size=50257 \
    --set model.max_seq_len=1024 --set train.micro_batch=16 --set train.global_batch=16 --set train.seq_len=1024 \
    >"$log" 2>&1 || true
  line=$(grep '^bench: tokens_per_s' "$log" | sed 's/^bench: //' || true)
  info=$(grep -o 'attention: .*' "$log" | head -1 | cut -c1-60 || true)
  if [ -z "$line" ]; then
    line="FAILED: $(grep -v '^bench: GPT' "$log" | tail -1 | cut -c1-150)"
  fi
  printf 'bench %-5s %-4s %-9s %s  [%s]\n' "$name" "$precision" "${HOLMES_ATTENTION:-auto}" "$line" "$info"
}

# The bench row of a ~1B Llama (Llama 3.2 1B's shape: 16 layers, hidden 2048, 32 query / 8
# key-value heads, SwiGLU 8192, vocabulary 128256 tied; 1.24B parameters), B=4 T=2048, in
# precision $1. Its line carries mfu (6 x matmul weights + 12 L T C per token) and mfu_llmc
# (llm.c's 6 N + 6 L T C); the second bench line names both formulas and the peak.
bench_llama_row() {
  local precision=$1 steps=${HOLMES_BENCH_STEPS:-10} log line info
  log="$logs/bench_llama1b_${precision}.log"
  timeout 300 "$dir/bin/holmes-train" bench --steps "$steps" --set job.device=cuda --set train.precision="$precision" \
    --set model.arch=llama --set model.layers=16 --set model.hidden=2048 --set model.heads=32 --set model.kv_heads=8 \
    --set model.ffn_hidden=8192 --set model.tie_embeddings=true --set model.vocab_size=128256 \
    --set model.max_seq_len=2048 --set train.micro_batch=4 --set train.global_batch=4 --set train.seq_len=2048 \
    >"$log" 2>&1 || true
  line=$(grep '^bench: tokens_per_s' "$log" | sed 's/^bench: //' || true)
  info=$(grep -o 'attention: .*' "$log" | head -1 | cut -c1-60 || true)
  [ -n "$line" ] || line="FAILED: $(grep -v '^bench: Llama' "$log" | tail -1 | cut -c1-150)"
  printf 'bench %-8s %-4s %s  [%s]\n' "llama-1B" "$precision" "$line" "$info"
  grep '^bench: mfu = ' "$log" | sed 's/^bench: /      /' || true
}

# Every step's loss of metrics file $3 within relative $1 of file $2's; prints the worst
# difference; exit 0 when within.
losses_within() {
  python3 - "$@" <<'PY'
import json, sys
def losses(path):
    return [r["loss"] for r in map(json.loads, open(path)) if "loss" in r]
tol, a, b = float(sys.argv[1]), losses(sys.argv[2]), losses(sys.argv[3])
worst = max(abs(x - y) / abs(x) for x, y in zip(a, b)) if a and len(a) == len(b) else float("inf")
print(sys.argv[3], len(a), len(b), "worst relative loss difference", worst)
sys.exit(0 if worst < tol else 1)
PY
}

# Several processes sharing the one GPU (docs/cuda.md): the default model as one process, then
# as each layout "name workers tp pp dp" given after $1..$3, every step's loss within relative
# $3 of the one process's, in precision $2. $1 = "gloo": parallel.nccl off, device buffers
# staged through pinned host memory into Gloo groups; "nccl": parallel.nccl on, each process
# its own NCCL_HOSTID (so NCCL connects the ranks over its socket transport), under MPS when
# nvidia-cuda-mps-control is there (without it the processes time-slice the GPU and each hop
# may wait a slice: slow, not wrong), with NCCL_DEBUG=INFO for INIT,NET: every worker's log
# must name its NCCL groups and NCCL's own "via NET/Socket" connections, so a slow row is told
# apart from a wrong one. Prints "pass ..." or "FAIL: ..." and leaves the runs under
# $logs/shared-$1-$2.
shared_gpu_check() {
  local mode=$1 precision=$2 tol=$3 sub="shared-$1-$2"
  shift 3
  local out="$logs/$sub" common=(--set job.device=cuda --set train.precision="$precision" --set train.steps=8
    --set train.micro_batch=4 --set train.global_batch=16 --set log.interval=1)
  local env=(NCCL_DEBUG=WARN) nccl=off mps=""
  if [ "$mode" = nccl ]; then
    env=(NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET)
    nccl=on
  fi
  common+=(--set parallel.nccl="$nccl")
  rm -rf "$out"
  mkdir -p "$out"
  if [ "$mode" = nccl ] && command -v nvidia-cuda-mps-control >/dev/null; then
    # A private MPS daemon for these runs (pipe and log folders of our own), stopped below.
    export CUDA_MPS_PIPE_DIRECTORY="$out/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps-log"
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d && mps=" under MPS"
  fi
  timeout 120 "$dir/bin/holmes-train" "${common[@]}" --set job.output_dir="$out/one" >"$out/one.log" 2>&1 ||
    { echo "FAIL: one process (see $sub/one.log)"; return; }
  local bad=() names=() name n t p d layout
  for layout in "$@"; do
    read -r name n t p d <<<"$layout"
    names+=("$name")
    env "${env[@]}" HOLMES_WORKERS_PER_GPU=$n timeout 180 "$dir/bin/holmes-train" --nproc-per-node "$n" "${common[@]}" \
      --set parallel.tensor="$t" --set parallel.pipeline="$p" --set parallel.data="$d" \
      ${HOLMES_SHARED_EXTRA:-} --set job.output_dir="$out/$name" >"$out/$name.log" 2>&1 || { bad+=("$name exit $? (see $sub/$name.log)"); continue; }
    if [ "$mode" = nccl ] && ! grep -q "nccl: .* over nccl" "$out/$name.log"; then
      bad+=("$name did not use NCCL groups ($sub/$name.log)")
      continue
    fi
    if [ "$mode" = nccl ] && ! grep -q "via NET/Socket" "$out/$name.log"; then
      bad+=("$name: NCCL logged no NET/Socket connection ($sub/$name.log)")
      continue
    fi
    losses_within "$tol" "$out/one/metrics.jsonl" "$out/$name/metrics.jsonl" >>"$out/compare.txt" 2>&1 ||
      bad+=("$name losses differ ($sub/compare.txt)")
  done
  if [ -n "$mps" ]; then
    echo quit | nvidia-cuda-mps-control || true
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
  if [ ${#bad[@]} -eq 0 ]; then echo "pass (${names[*]} vs one process, $precision$mps)"; else echo "FAIL: ${bad[*]}"; fi
}

# The CUDA libraries opened at run time (cuBLASLt, cuDNN, NCCL) come from the image: its
# toolkit, or the nvidia-* packages of its PyTorch environment. Their folders go on the loader
# path after the bundle's own libraries; what was found goes to $logs/libraries.txt.
library_path() {
  local libpath="$PWD/$dir/lib" lib d
  found=()
  for lib in libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
    d=$(find_lib_dir "$lib")
    found+=("$lib=${d:-NOT FOUND}")
    [ -n "$d" ] && libpath="$libpath:$d"
  done
  export LD_LIBRARY_PATH="$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export HOLMES_TRAIN_BINARY="$PWD/$dir/bin/holmes-train"  # for test_cuda's binary tests
  printf '%s\n' "${found[@]}" >"$logs/libraries.txt"
}

# Where the time of a GPT-2 124M bf16 step goes (B=16 T=1024): every kernel of the bench's two
# warm-up steps and one timed step, timed alone by Nsight Compute (ncu, in the CUDA toolkit);
# the sum per kernel name over one step printed, largest first, against the bench's step time
# (the difference is time the GPU waited for the host). The raw CSV is archived under $OUT.
profile() {
  [ -x "$dir/bin/holmes-train" ] || { echo "gpu_check: $dir/bin/holmes-train missing; run 'bundle' first" >&2; exit 2; }
  logs=$(mktemp -d)
  library_path
  local ncu
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
  [ -n "$ncu" ] || { echo "gpu_check: no ncu in this image"; exit 1; }
  local model=(--set job.device=cuda --set train.precision=bf16 --set model.layers=12 --set model.hidden=768
    --set model.heads=12 --set model.vocab_size=50257 --set model.max_seq_len=1024 --set train.micro_batch=16
    --set train.global_batch=16 --set train.seq_len=1024)
  "$dir/bin/holmes-train" bench --steps 20 "${model[@]}" 2>&1 | grep '^bench: tokens' | tee "$logs/bench.txt"
  "$ncu" --csv --print-units base --metrics gpu__time_duration.sum --log-file "$logs/ncu.csv" \
    "$dir/bin/holmes-train" bench --steps 1 "${model[@]}" >"$logs/profile.log" 2>&1 || { tail -20 "$logs/profile.log" "$logs/ncu.csv"; exit 1; }
  python3 - "$logs/ncu.csv" "$logs/bench.txt" <<'PY' | tee "$logs/kernels.txt"
import csv, re, sys, collections
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = [r for r in csv.DictReader(lines) if r.get("Metric Name") == "gpu__time_duration.sum"]
steps = 3  # two warm-up steps and one timed step
total = collections.defaultdict(float); count = collections.Counter()
for r in rows:
    name = re.sub(r"\(.*", "", r["Kernel Name"])[:80]
    total[name] += float(r["Metric Value"].replace(",", "")) / 1e6 / steps
    count[name] += 1
step = float(re.search(r"ms_per_step=([0-9.]+)", open(sys.argv[2]).read()).group(1))
busy = sum(total.values())
print(f"kernels per step {sum(count.values()) / steps:.0f}, kernel time {busy:.2f} ms of a {step:.2f} ms step (GPU idle {step - busy:.2f} ms)")
for name, ms in sorted(total.items(), key=lambda kv: -kv[1])[:40]:
    print(f"{ms:8.3f} ms {100 * ms / step:5.1f}%  n={count[name] / steps:5.1f}  {name}")
PY
  if [ -n "${OUT:-}" ]; then
    tar -C "$logs" -czf "$OUT/gpu_profile.tar.gz" . || true
  fi
}

# ---- the rows of issue 51 (FP8) ------------------------------------------------------------

# A 1.24B Llama (bench_llama_row's shape, B=4 T=2048) trained on the bundle's text for
# HOLMES_FP8_STEPS steps in precision $1, validated at the end (16 batches of the held-out
# text); the run folder is $logs/text-$1.
llama_text_run() {
  local precision=$1 steps=${HOLMES_FP8_STEPS:-150}
  timeout 420 "$dir/bin/holmes-train" --set job.device=cuda --set train.precision="$precision" \
    --set model.arch=llama --set model.layers=16 --set model.hidden=2048 --set model.heads=32 --set model.kv_heads=8 \
    --set model.ffn_hidden=8192 --set model.tie_embeddings=true --set model.vocab_size=128256 \
    --set model.max_seq_len=2048 --set train.micro_batch=4 --set train.global_batch=4 --set train.seq_len=2048 \
    --set data.source=files --set data.train="$logs/text/train.bin" --set data.valid="$logs/text/valid.bin" \
    --set train.steps="$steps" --set train.warmup_steps=20 --set train.lr=3e-4 --set train.min_lr=3e-5 \
    --set train.eval_interval="$steps" --set train.eval_steps=16 --set log.interval=10 \
    --set job.output_dir="$logs/text-$precision" >"$logs/text-$precision.log" 2>&1
}

# The bf16 and fp8 runs of llama_text_run compared: tokens/s (median of the logged steps after
# the first 20) and the validation loss; pass when fp8 is at least 1.3x bf16's tokens/s and its
# validation loss within 1.5% of bf16's (issue 51).
fp8_text_row() {
  mkdir -p "$logs/text"
  gzip -dc "$dir/data/train.txt.gz" >"$logs/text/train.txt" && gzip -dc "$dir/data/valid.txt.gz" >"$logs/text/valid.txt" ||
    { echo "FAIL: the bundle has no text corpus ($dir/data)"; return; }
  "$dir/bin/holmes-train" prepare-data --input "$logs/text/train.txt" --out "$logs/text/train.bin" --tokenizer bytes \
    >"$logs/text/prepare.log" 2>&1 &&
    "$dir/bin/holmes-train" prepare-data --input "$logs/text/valid.txt" --out "$logs/text/valid.bin" --tokenizer bytes \
      >>"$logs/text/prepare.log" 2>&1 || { echo "FAIL: prepare-data (text/prepare.log)"; return; }
  llama_text_run bf16 || { echo "FAIL: bf16 run exit $? (text-bf16.log)"; return; }
  llama_text_run fp8 || { echo "FAIL: fp8 run exit $? (text-fp8.log)"; return; }
  python3 - "$logs/text-bf16/metrics.jsonl" "$logs/text-fp8/metrics.jsonl" <<'PY'
import json, statistics, sys
def read(path):
    rows = [json.loads(l) for l in open(path)]
    tps = [r["tokens_per_s"] for r in rows if "tokens_per_s" in r and r.get("step", 0) > 20]
    val = [r["val_loss"] for r in rows if "val_loss" in r]
    loss = [r["loss"] for r in rows if "loss" in r]
    return statistics.median(tps) if tps else float("nan"), val[-1] if val else float("nan"), loss[-1] if loss else float("nan")
(tb, vb, lb), (tf, vf, lf) = read(sys.argv[1]), read(sys.argv[2])
ratio, dv = tf / tb, abs(vf - vb) / vb
ok = ratio >= 1.3 and dv <= 0.015
print(("pass: " if ok else "FAIL: ") + f"fp8 {tf:,.0f} tok/s vs bf16 {tb:,.0f} ({ratio:.2f}x, target 1.3x); "
      f"val loss fp8 {vf:.4f} bf16 {vb:.4f} ({100 * dv:.2f}%, target 1.5%); last train loss {lf:.4f} / {lb:.4f}")
PY
}

# The FP8 parity tables of test_cuda "[fp8]" (fp8_test.cpp), into $logs/fp8_parity.txt.
fp8_parity_row() {
  local ok=pass
  timeout 300 "$dir/bin/test_cuda" "[fp8]" >"$logs/fp8_tests.log" 2>&1 || ok=FAIL
  grep -q HOLMES_SKIP "$logs/fp8_tests.log" && ok=FAIL
  grep -E '^\| ' "$logs/fp8_tests.log" | grep -vE '^\| (op|---) ' >"$logs/fp8_parity.txt" || true
  echo "$ok: $(wc -l <"$logs/fp8_parity.txt") parity rows, $(grep -c '| FAIL |' "$logs/fp8_parity.txt" || true) failing; $(grep -E '^(All tests passed|test cases:)' "$logs/fp8_tests.log" | tail -1)"
}

# nsys on the 124M bf16 step, where the image has an nsys that makes a report (KINDS.md saw
# one write only a .qdstrm): the CUDA API and kernel summary, else why not.
nsys_row() {
  local nsys
  nsys=$(command -v nsys || ls /usr/local/cuda/bin/nsys 2>/dev/null || true)
  [ -n "$nsys" ] || { echo "skipped: no nsys on the PATH or in /usr/local/cuda/bin"; return; }
  timeout 240 "$nsys" profile -o "$logs/nsys-124M" --force-overwrite true -t cuda "$dir/bin/holmes-train" bench \
    --steps 3 --set job.device=cuda --set train.precision=bf16 --set model.layers=12 --set model.hidden=768 \
    --set model.heads=12 --set model.vocab_size=50257 --set model.max_seq_len=1024 --set train.micro_batch=16 \
    --set train.global_batch=16 --set train.seq_len=1024 >"$logs/nsys.log" 2>&1 || { echo "FAIL: nsys exit $? (nsys.log)"; return; }
  "$nsys" stats -r cuda_gpu_kern_sum,cuda_api_sum "$logs/nsys-124M.nsys-rep" >"$logs/nsys_stats.txt" 2>&1 ||
    { echo "FAIL: nsys stats (nsys_stats.txt)"; return; }
  echo "pass: kernel and API summaries in nsys_stats.txt"
}

fp8_checks() {
  [ -x "$dir/bin/holmes-train" ] || { echo "gpu_check: $dir/bin/holmes-train missing; run 'bundle' first" >&2; exit 2; }
  logs=$(mktemp -d)
  library_path
  local budget=${HOLMES_CHECK_BUDGET_S:-480} rows=() r
  row() {  # row NAME FUNCTION ARGS...: its last line, or a skip once the budget is spent
    local name=$1
    shift
    if [ "$SECONDS" -lt "$budget" ]; then r=$("$@" 2>&1 | tail -1 || true); else r="skipped: the $budget s budget was spent"; fi
    rows+=("$(printf '%-26s %s' "$name" "$r")")
    echo "${rows[-1]}"
  }
  row "fp8 parity (test_cuda)" fp8_parity_row
  row "llama 1.24B text fp8/bf16" fp8_text_row
  local b
  for b in "124M bf16 12 768 12" "124M fp8 12 768 12" "350M bf16 24 1024 16" "350M fp8 24 1024 16"; do
    # shellcheck disable=SC2086
    row "bench $(cut -d' ' -f1-2 <<<"$b")" bench_row $b
  done
  row "bench llama-1B fp8" bench_llama_row fp8
  if [ "$SECONDS" -lt "$budget" ]; then (profile) >"$logs/ncu_profile.txt" 2>&1 || true; fi
  row "ncu profile 124M bf16" bash -c "grep -m1 -e '^kernels per step' -e 'gpu_check:' '$logs/ncu_profile.txt' || echo 'not run (budget) or failed: see ncu_profile.txt'"
  row "nsys 124M bf16" nsys_row
  echo
  echo "gpu_check fp8 on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) (${SECONDS} s)"
  printf '%s\n' "${rows[@]}"
  echo "fp8 parity rows (failures first):"
  { grep '| FAIL |' "$logs/fp8_parity.txt" || true; grep -v '| FAIL |' "$logs/fp8_parity.txt" || true; } | head -40
  if [ -n "${OUT:-}" ]; then
    tar -C "$logs" --exclude=checkpoints --exclude=final --exclude='*.bin' --exclude='*.txt.gz' --exclude=text \
      -czf "$OUT/gpu_fp8_logs.tar.gz" . || true
  fi
}

# ---- issue 52: document masking on the cudnn method --------------------------------------------

# test_cuda's document-mask rows; prints "pass|FAIL: <summary>; <the masked plan's line>".
document_mask_row() {
  local log="$logs/document_mask.log" r=pass
  timeout 300 "$dir/bin/test_cuda" "[document_mask]" >"$log" 2>&1 || r=FAIL
  grep -q HOLMES_SKIP "$log" && r=FAIL
  echo "$r: $(grep -E '^(All tests passed|test cases:)' "$log" | tail -1); $(grep -m1 -o 'document mask plan: .*' "$log" | cut -c1-160)$(grep -m3 'serves no' "$log" | cut -c1-160 | tr '\n' ';')"
}

# A document-masked bf16 GPT-2 (4 layers, hidden 256, 4 heads of 64; T 256, a multiple of 128
# as cuDNN 9.15 and older need; the synthetic data, documents at token 256) trained 30 steps
# with the automatic method (cudnn, its line must say so) and with HOLMES_ATTENTION=fallback:
# every step's loss within relative 2e-2.
document_mask_train_row() {
  local common=(--set job.device=cuda --set train.precision=bf16 --set data.document_mask=true --set train.steps=30
    --set model.layers=4 --set model.hidden=256 --set model.heads=4 --set model.max_seq_len=256 --set train.seq_len=256
    --set train.micro_batch=4 --set train.global_batch=8 --set job.overwrite=true) m
  for m in auto fallback; do
    HOLMES_ATTENTION=${m/auto/} timeout 300 "$dir/bin/holmes-train" "${common[@]}" --set job.output_dir="$logs/mask-$m" \
      >"$logs/mask_train_$m.log" 2>&1 || { echo "FAIL: the $m run: $(tail -1 "$logs/mask_train_$m.log" | cut -c1-150)"; return; }
  done
  grep -q 'attention: cudnn.*documents masked' "$logs/mask_train_auto.log" ||
    { echo "FAIL: the masked run did not take cudnn: $(grep -m1 -o 'attention: .*' "$logs/mask_train_auto.log" | cut -c1-150)"; return; }
  if losses_within 2e-2 "$logs/mask-fallback/metrics.jsonl" "$logs/mask-auto/metrics.jsonl" >"$logs/mask_compare.txt" 2>&1; then
    echo "pass: $(cut -d' ' -f2- "$logs/mask_compare.txt")"
  else
    echo "FAIL: $(cut -c1-150 "$logs/mask_compare.txt")"
  fi
}

mask_checks() {
  [ -x "$dir/bin/holmes-train" ] || { echo "gpu_check: $dir/bin/holmes-train missing; run 'bundle' first" >&2; exit 2; }
  logs=$(mktemp -d)
  library_path
  local tests train
  tests=$(document_mask_row)
  train=$(document_mask_train_row)
  echo "gpu_check mask on $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) (${SECONDS} s)"
  echo "libraries: ${found[*]}"
  printf '%-28s %s\n' "document mask tests" "$tests" "masked bf16 cudnn vs fallback" "$train"
  if [ -n "${OUT:-}" ]; then
    tar -C "$logs" --exclude=checkpoints --exclude=final -czf "$OUT/gpu_mask_logs.tar.gz" . || true
  fi
  [[ $tests == pass* ]] && [[ $train == pass* ]]
}

run_checks() {
  [ -x "$dir/bin/holmes-train" ] || { echo "gpu_check: $dir/bin/holmes-train missing; run 'bundle' first" >&2; exit 2; }
  # logs go to a scratch folder; with $OUT set (the device tool brings back at most 8 files)
  # they come back as one archive, without the runs' checkpoints
  logs=$(mktemp -d)
  library_path
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$logs/gpu.txt" || true
  # 1. every CUDA test; on a GPU machine a skip means the GPU was not usable
  local tests=pass
  timeout 300 "$dir/bin/test_cuda" --durations yes >"$logs/test_cuda.log" 2>&1 || tests=FAIL
  if grep -q HOLMES_SKIP "$logs/test_cuda.log"; then tests=FAIL; fi
  local summary failed
  summary=$(grep -E '^(All tests passed|test cases:)' "$logs/test_cuda.log" | tail -1)
  failed=$(awk '/^\.\.\.\.\.\.\.\.\.\.+$/ { test = name } /FAILED:/ { print test } { name = prev2; prev2 = prev1; prev1 = $0 }' "$logs/test_cuda.log" |
    sort -u | head -5 | tr '\n' ';' || true)
  # 2. the whole model (its own line in the table; part of test_cuda above)
  local whole=pass
  timeout 120 "$dir/bin/test_cuda" "whole model*" >"$logs/whole_model.log" 2>&1 || whole=FAIL
  grep -q HOLMES_SKIP "$logs/whole_model.log" && whole=FAIL
  # 2a. the Llama rows: rmsnorm / rope / swiglu parity and repeats, grouped-query attention
  #     (cuDNN, fallback, exact) against the CPU twin, the whole llama model GPU vs CPU
  local llama_ops=pass llama_attention=pass llama_whole=pass
  timeout 300 "$dir/bin/test_cuda" "[llama]" >"$logs/llama_ops.log" 2>&1 || llama_ops=FAIL
  grep -q HOLMES_SKIP "$logs/llama_ops.log" && llama_ops=FAIL
  timeout 300 "$dir/bin/test_cuda" "[attention]" >"$logs/llama_attention.log" 2>&1 || llama_attention=FAIL
  timeout 120 "$dir/bin/test_cuda" "llama whole model*" >"$logs/llama_whole.log" 2>&1 || llama_whole=FAIL
  grep -q HOLMES_SKIP "$logs/llama_whole.log" && llama_whole=FAIL
  # 2a'. document masking (issue 52): the cudnn method's masked graphs, the bias kernel
  local mask
  mask=$(document_mask_row)
  # 2b. the NCCL groups on this one GPU (docs/comm.md): size-1 groups on Socket and IB running
  # every op, a member that never joins, two members on one GPU; libnccl comes from the image
  local nccl=pass nccl_lib nccl_host
  timeout 120 "$dir/bin/test_cuda" "[nccl]" >"$logs/nccl.log" 2>&1 || nccl=FAIL
  grep -q HOLMES_SKIP "$logs/nccl.log" && nccl=FAIL
  nccl_lib=$(grep -m1 '^NCCL [0-9]' "$logs/nccl.log" || echo "libnccl not loaded (see nccl.log)")
  nccl_host=$(grep -m1 -o 'nccl host time per all_reduce enqueue: .*' "$logs/nccl.log" || echo "not measured")
  # 2c. several processes sharing the GPU: parallel.nccl off (staged through pinned memory into
  #     Gloo) and on (NCCL, an NCCL_HOSTID per process)
  local shared shared_nccl shared_bf16
  # fp32 is exact enough to compare layouts at 1e-4; bf16 checks tensor parallelism (fp32 sums
  # of the bf16 shards) and pipeline stages (bf16 boundaries) at the bf16 tolerance
  local layouts=("dp2 2 1 1 2" "pp2 2 1 2 1" "tp2xpp2 4 2 2 1" "tp2xpp2xdp2 8 2 2 2")
  shared=$(shared_gpu_check gloo fp32 1e-4 "${layouts[@]}")
  shared_nccl=$(shared_gpu_check nccl fp32 1e-4 "${layouts[@]}")
  shared_bf16=$(shared_gpu_check gloo bf16 2e-2 "tp2 2 2 1 1" "pp2 2 1 2 1" "dp2 2 1 1 2")
  # 2d. the default job with job.device auto: it must train on this GPU (the log line shows
  #     "gpu N MiB" only there)
  local auto_dev
  if timeout 120 "$dir/bin/holmes-train" --set train.steps=50 --set job.output_dir="$logs/auto" >"$logs/auto.log" 2>&1 &&
    grep -q 'gpu [0-9]* MiB' "$logs/auto.log"; then
    auto_dev="pass: $(grep 'gpu [0-9]* MiB' "$logs/auto.log" | tail -1 | cut -c1-110)"
  else
    auto_dev="FAIL: $(tail -1 "$logs/auto.log" | cut -c1-120)"
  fi
  # 3. the parity table (parity_table_test.cpp prints one markdown row per op x precision x
  #    shape x output)
  grep -E '^\| ' "$logs/test_cuda.log" | grep -vE '^\| (op|---) ' >"$logs/parity_table.txt" || true
  # 4. the bench: GPT-2 124M (bf16: the issue's MFU target; fp32; bf16 with the fallback
  #    attention) and 350M, B=16 T=1024
  local rows
  rows=$(
    bench_row 124M bf16 12 768 12
    bench_row 124M fp32 12 768 12
    HOLMES_ATTENTION=fallback bench_row 124M bf16 12 768 12
    bench_row 350M bf16 24 1024 16
    bench_llama_row bf16
  )
  "$dir/bin/holmes_gemm_bench" 8192 768 50 >"$logs/gemm_bench.log" 2>&1 || true
  echo
  if [ -s "$logs/parity_table.txt" ]; then
    echo "parity table ($(wc -l <"$logs/parity_table.txt") rows, $(grep -c '| FAIL |' "$logs/parity_table.txt") failing; failures first, all in parity_table.txt):"
    echo "| op | precision | shape | output | max normalized error | tolerance | result |"
    echo "| --- | --- | --- | --- | --- | --- | --- |"
    { grep '| FAIL |' "$logs/parity_table.txt" || true; grep -v '| FAIL |' "$logs/parity_table.txt" || true; } | head -80
    echo
  fi
  echo "gpu_check on $(head -1 "$logs/gpu.txt")"
  echo "libraries: ${found[*]}"
  printf '%-24s %s\n' "CUDA tests (test_cuda)" "$tests: $summary ${failed:+(first failures: $failed)}" \
    "whole model vs CPU" "$whole" "llama ops parity" "$llama_ops" "attention incl. GQA" "$llama_attention" \
    "llama whole model vs CPU" "$llama_whole" "document mask (cudnn)" "$mask" "NCCL groups, one GPU" "$nccl: $nccl_lib" \
    "NCCL host time per op" "$nccl_host" \
    "shared GPU, Gloo staged" "$shared" "shared GPU, NCCL groups" "$shared_nccl" \
    "shared GPU, bf16 tp2 pp2 dp2" "$shared_bf16" "default job, device auto" "$auto_dev"
  echo "$rows"
  tail -1 "$logs/gemm_bench.log" | sed 's/^/gemm  /'
  if [ -n "${OUT:-}" ]; then
    tar -C "$logs" --exclude=checkpoints --exclude=final -czf "$OUT/gpu_check_logs.tar.gz" . || true
  fi
  echo "logs: $logs${OUT:+ (archived in \$OUT/gpu_check_logs.tar.gz)}"
  [ "$tests" = pass ] && [ "$whole" = pass ] && [ "$llama_ops" = pass ] && [ "$llama_attention" = pass ] &&
    [ "$llama_whole" = pass ] && [[ $mask == pass* ]] && [ "$nccl" = pass ] && [[ $shared == pass* ]] && [[ $shared_nccl == pass* ]] && [[ $shared_bf16 == pass* ]] && [[ $auto_dev == pass* ]]
}

# ---- the rows of issues 26 and 28 (recompute, schedules, diloco) ----------------------------------
# `extra` runs after `run` (same bundle); every row is bounded and skipped, saying so, once
# HOLMES_CHECK_BUDGET_S (default 400) seconds have passed, so the table always prints.

# true while the extra rows' time budget lasts
in_budget() { [ "$SECONDS" -lt "${HOLMES_CHECK_BUDGET_S:-400}" ]; }

# Device memory per recompute mode: a GPT-2 124M bf16 job (B=8, T=1024, 3 steps) in none,
# selective and full; the trainer's device_mb (cudaMemGetInfo, after the step) of each, and the
# saving of full and selective against none compared with the plan's activation bytes
# (--plan-only --format json, the same job), and each mode's measured total against the plan's
# whole per-device bytes (its CUDA runtime term included): all within 10% passes.
recompute_memory_row() {
  local job=(--set job.device=cuda --set train.precision=bf16 --set model.layers=12 --set model.hidden=768
    --set model.heads=12 --set model.vocab_size=50257 --set model.max_seq_len=1024 --set train.seq_len=1024
    --set train.micro_batch=8 --set train.global_batch=8 --set train.eval_interval=0 --set log.interval=1)
  local mode args=()
  for mode in none selective full; do
    timeout 120 "$dir/bin/holmes-train" "${job[@]}" --set train.recompute=$mode --set train.steps=3 \
      --set job.output_dir="$logs/recompute-$mode" >"$logs/recompute-$mode.log" 2>&1 ||
      { echo "FAIL: recompute $mode exit $? (recompute-$mode.log)"; return; }
    "$dir/bin/holmes-train" "${job[@]}" --set train.recompute=$mode --set train.steps=3 --plan-only --format json \
      >"$logs/recompute-$mode.plan.json" 2>"$logs/recompute-$mode.plan.log" ||
      { echo "FAIL: recompute $mode --plan-only exit $?"; return; }
    args+=("$logs/recompute-$mode")
  done
  python3 - "${args[@]}" <<'PY'
import json, sys
def measured(d):
    rows = [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "device_mb" in r]
    return max(r["device_mb"] for r in rows) * 2**20
def plan(d):
    m = json.load(open(d + ".plan.json"))["memory"][0]
    return m["activations"], m["bytes"]
(none, sel, full) = sys.argv[1:]
mn, ms, mf = measured(none), measured(sel), measured(full)
(an, bn), (as_, bs), (af, bf) = plan(none), plan(sel), plan(full)
ok, parts = True, []
for name, got, want in (("full", mn - mf, an - af), ("selective", mn - ms, an - as_)):
    err = abs(got - want) / want if want > 0 else float("inf")
    ok &= err <= 0.10
    parts.append(f"{name} saves {got / 2**20:.0f} MiB, model {want / 2**20:.0f} ({100 * err:.1f}%)")
# the plan's whole per-device bytes (with its CUDA runtime term) against the measured total
for m, b in ((mn, bn), (ms, bs), (mf, bf)):
    ok &= abs(m - b) / m <= 0.10
totals = ", ".join(f"{n} {m / 2**20:.0f}/{b / 2**20:.0f}" for n, m, b in (("none", mn, bn), ("sel", ms, bs), ("full", mf, bf)))
print(("pass: " if ok else "FAIL: ") + "; ".join(parts) + f"; device MiB measured/planned {totals}")
PY
}

# The largest model of one shape that the planner fits on this GPU in recompute mode $2, found
# by bisecting model.layers with --plan-only (exit 0 = fits), then trained for 2 steps: "name
# mode: L layers (N params) trains, device X MiB of Y planned, Z tok/s". $1 = gpt2 | llama.
largest_row() {
  local arch=$1 mode=$2 shape
  if [ "$arch" = gpt2 ]; then  # GPT-2 XL's width, T=1024, micro-batch 8
    shape=(--set model.hidden=1600 --set model.heads=25 --set model.vocab_size=50257 --set model.max_seq_len=1024
      --set train.seq_len=1024 --set train.micro_batch=8 --set train.global_batch=8)
  else  # Llama 3 8B's width, T=2048, micro-batch 2
    shape=(--set model.arch=llama --set model.hidden=4096 --set model.heads=32 --set model.kv_heads=8
      --set model.ffn_hidden=14336 --set model.vocab_size=128256 --set model.max_seq_len=2048
      --set train.seq_len=2048 --set train.micro_batch=2 --set train.global_batch=2)
  fi
  local job=(--set job.device=cuda --set train.precision=bf16 --set train.recompute="$mode" --set train.eval_interval=0
    --set log.interval=1 "${shape[@]}")
  local lo=1 hi=512 mid
  fits() { "$dir/bin/holmes-train" "${job[@]}" --set model.layers="$1" --set train.steps=2 --plan-only --format json \
    >"$logs/largest-$arch-$mode.plan.json" 2>/dev/null; }
  fits $lo || { echo "FAIL: $arch $mode: one layer does not fit"; return; }
  while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    if fits $mid; then lo=$mid; else hi=$mid; fi
  done
  fits $lo
  local out="$logs/largest-$arch-$mode" rc=0
  timeout 150 "$dir/bin/holmes-train" bench --steps 2 "${job[@]}" --set model.layers=$lo >"$out.log" 2>&1 || rc=$?
  local line
  line=$(grep '^bench: tokens_per_s' "$out.log" | sed 's/^bench: //' || true)
  if [ $rc -ne 0 ] || [ -z "$line" ]; then
    echo "FAIL: $arch $mode L=$lo: exit $rc ($(grep -v '^ *$' "$out.log" | tail -1 | cut -c1-120))"
    return
  fi
  python3 - "$arch" "$mode" "$lo" "$out" "$line" <<'PY'
import json, re, sys
arch, mode, layers, out, line = sys.argv[1:]
plan = json.load(open(out + ".plan.json"))
m = plan["memory"][0]
f = dict(re.findall(r"(\w+)=([^ ]+)", line))
print(f"{arch} {mode}: {layers} layers ({plan['params'] / 1e9:.2f}B params) trains; device {f['device_mb']} MiB, "
      f"planned {m['bytes'] / 2**20:.0f} of {m['capacity'] / 2**20:.0f} usable; {f['ms_per_step']} ms/step, "
      f"mfu {f['mfu']} (llm.c {f['mfu_llmc']})")
PY
}

# A diloco job (2 replicas sharing the GPU, H=4, fp32) against the same job on the CPU: every
# step's loss within relative 1e-3 (the outer side group's device path: pseudo-gradients staged
# from device buffers, the outer step applied on the device).
diloco_row() {
  local job=(--nproc-per-node 2 --set parallel.replicas=2 --set parallel.outer=diloco --set parallel.inner_steps=4
    --set train.precision=fp32 --set train.steps=10 --set train.micro_batch=4 --set train.global_batch=8 --set log.interval=1)
  HOLMES_WORKERS_PER_GPU=2 timeout 150 "$dir/bin/holmes-train" "${job[@]}" --set job.device=cuda \
    --set job.output_dir="$logs/diloco-gpu" >"$logs/diloco-gpu.log" 2>&1 || { echo "FAIL: gpu exit $? (diloco-gpu.log)"; return; }
  timeout 150 "$dir/bin/holmes-train" "${job[@]}" --set job.device=cpu \
    --set job.output_dir="$logs/diloco-cpu" >"$logs/diloco-cpu.log" 2>&1 || { echo "FAIL: cpu exit $? (diloco-cpu.log)"; return; }
  if losses_within 1e-3 "$logs/diloco-cpu/metrics.jsonl" "$logs/diloco-gpu/metrics.jsonl" >"$logs/diloco-compare.txt" 2>&1; then
    echo "pass: 10 steps, 2 outer syncs, losses within 1e-3 of the CPU ($(grep -o 'worst.*' "$logs/diloco-compare.txt"))"
  else
    echo "FAIL: losses differ from the CPU ($(cat "$logs/diloco-compare.txt" | cut -c1-150))"
  fi
}

# zb-h1 with full recomputation on pipeline layouts sharing the GPU, against one process of
# the default schedule without recomputation (fp32, every loss within 1e-4)
zb_row() {
  HOLMES_SHARED_EXTRA="--set parallel.schedule=zb-h1 --set train.recompute=full" \
    shared_gpu_check gloo fp32 1e-4 "pp2 2 1 2 1" "tp2xpp2xdp2 8 2 2 2"
}

# interleaved 1F1B (virtual_stages 2) on pipeline layouts sharing the GPU, against one process
# of the default schedule: $1 = gloo (staged) or nccl
interleaved_row() {
  HOLMES_SHARED_EXTRA="--set parallel.schedule=interleaved --set parallel.virtual_stages=2" \
    shared_gpu_check "$1" fp32 1e-4 "pp2 2 1 2 1" "tp2xpp2xdp2 8 2 2 2"
}

extra_checks() {
  [ -x "$dir/bin/holmes-train" ] || { echo "gpu_check: $dir/bin/holmes-train missing; run 'bundle' first" >&2; exit 2; }
  logs=$(mktemp -d)
  library_path
  local rows=() r
  # row KEY NAME FUNCTION ARGS...: the function's line, or a skip once the budget is spent;
  # HOLMES_EXTRA_ONLY (keys separated by spaces) runs only those rows
  row() {
    local key=$1 name=$2
    shift 2
    if [ -n "${HOLMES_EXTRA_ONLY:-}" ] && [[ " $HOLMES_EXTRA_ONLY " != *" $key "* ]]; then return; fi
    if in_budget; then r=$("$@" 2>&1 | tail -1 || true); else r="skipped: the ${HOLMES_CHECK_BUDGET_S:-400} s budget was spent"; fi
    rows+=("$(printf '%-28s %s' "$name" "$r")")
    echo "${rows[-1]}"
  }
  row recompute "recompute device memory" recompute_memory_row
  row zb "zb-h1+full, Gloo fp32" zb_row
  row interleaved "interleaved V2, Gloo fp32" interleaved_row gloo
  row interleaved-nccl "interleaved V2, NCCL fp32" interleaved_row nccl
  row diloco "diloco 2 replicas vs CPU" diloco_row
  row largest-gpt2-none "largest gpt2, none" largest_row gpt2 none
  row largest-gpt2-full "largest gpt2, full" largest_row gpt2 full
  row largest-llama-none "largest llama, none" largest_row llama none
  row largest-llama-full "largest llama, full" largest_row llama full
  echo
  echo "gpu_check extra on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) (${SECONDS} s)"
  printf '%s\n' "${rows[@]}"
  if [ -n "${OUT:-}" ]; then
    tar -C "$logs" --exclude=checkpoints --exclude=final -czf "$OUT/gpu_extra_logs.tar.gz" . || true
  fi
}

# One row of `plan`: calibrate model $2 (flags in $models[$2]) at micro-batches $3 (quoted list),
# then --plan-only against bench at micro-batch $4 and recompute $5.
plan_row() {
  local name=$1 model=$2 table_mbs=$3 mb=$4 recompute=$5 cal log bench_ms plan_s
  cal="$logs/cal_${model}.yaml"
  # shellcheck disable=SC2086
  local flags=(--set job.device=cuda --set train.precision=bf16 ${models[$model]})
  if [ ! -s "$cal" ]; then
    # shellcheck disable=SC2086
    timeout 900 "$dir/bin/holmes-train" calibrate "${flags[@]}" --set train.micro_batch=auto --set train.global_batch=64 \
      --micro-batches $table_mbs --tp 1 --reps 3 --out "$cal" >"$logs/calibrate_${model}.log" 2>&1 \
      || { echo "plan $name: calibrate FAILED: $(tail -1 "$logs/calibrate_${model}.log" | cut -c1-150)"; return; }
  fi
  local job=("${flags[@]}" --set train.micro_batch="$mb" --set train.global_batch="$mb" --set train.recompute="$recompute"
    --set parallel.schedule=1f1b)
  log="$logs/plan_${name}.json"
  "$dir/bin/holmes-train" "${job[@]}" --plan-only --format json --set cluster.calibration="$cal" >"$log" 2>&1 \
    || { echo "plan $name: --plan-only FAILED: $(tail -1 "$log" | cut -c1-150)"; return; }
  timeout 600 "$dir/bin/holmes-train" bench "${job[@]}" --steps "${HOLMES_BENCH_STEPS:-10}" >"$logs/bench_plan_${name}.log" 2>&1 || true
  bench_ms=$(grep -o 'ms_per_step=[0-9.]*' "$logs/bench_plan_${name}.log" | cut -d= -f2)
  python3 - "$log" "${bench_ms:-0}" "$name" <<'PY'
import json, sys
plan = json.load(open(sys.argv[1]))
est, bench = plan["estimate"], float(sys.argv[2])
pred = est["step_time_s"] * 1e3
err = pred / bench - 1 if bench > 0 else float("nan")
print(f"plan {sys.argv[3]:<24} predicted {pred:8.2f} ms  bench {bench:8.2f} ms  error {100 * err:+6.1f}%  "
      f"(compute {est['sources'].get('compute')}; update {est['sources'].get('update')})")
PY
}

plan_checks() {
  logs=${OUT:-gpu-logs}
  mkdir -p "$logs"
  library_path
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
  declare -gA models=(
    [gpt2-124m]="--set model.layers=12 --set model.hidden=768 --set model.heads=12 --set model.vocab_size=50257 --set model.max_seq_len=1024 --set train.seq_len=1024"
    [gpt2-350m]="--set model.layers=24 --set model.hidden=1024 --set model.heads=16 --set model.vocab_size=50257 --set model.max_seq_len=1024 --set train.seq_len=1024"
    [llama-1b]="--set model.arch=llama --set model.layers=16 --set model.hidden=2048 --set model.heads=32 --set model.kv_heads=8 --set model.ffn_hidden=8192 --set model.tie_embeddings=true --set model.vocab_size=128256 --set model.max_seq_len=2048 --set train.seq_len=2048"
    [llama-3b]="--set model.arch=llama --set model.layers=28 --set model.hidden=3072 --set model.heads=24 --set model.kv_heads=8 --set model.ffn_hidden=8192 --set model.tie_embeddings=true --set model.vocab_size=128256 --set model.max_seq_len=2048 --set train.seq_len=2048"
  )
  # Tables at micro-batches the bench rows do not run: each prediction interpolates or
  # extrapolates (none of the six is a measured row).
  plan_row gpt2-124m-b4-none gpt2-124m "1 2 8 32" 4 none
  plan_row gpt2-124m-b16-full gpt2-124m "1 2 8 32" 16 full
  plan_row gpt2-350m-b4-full gpt2-350m "1 2 8" 4 full
  plan_row gpt2-350m-b12-none gpt2-350m "1 2 8" 12 none
  plan_row llama-1b-b4-none llama-1b "1 2 8" 4 none
  plan_row llama-3b-b1-full llama-3b "2 4" 1 full
  local gpus
  gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$gpus" -ge 2 ]; then  # a tensor-parallel slice's shapes: tp 2 over two GPUs, table and curves
    timeout 900 "$dir/bin/holmes-train" calibrate --set job.device=cuda --set train.precision=bf16 ${models[llama-1b]} \
      --set train.micro_batch=2 --set train.global_batch=8 --tp 1 2 --out "$logs/cal_llama-1b-tp2.yaml" \
      --nproc-per-node 2 >"$logs/calibrate_llama-1b-tp2.log" 2>&1 || echo "plan tp2: calibrate FAILED"
    echo "plan tp2: a 2-GPU training run against --plan-only with $logs/cal_llama-1b-tp2.yaml: see the file"
  else
    echo "plan tp2: one GPU: the tensor-parallel slice's row needs two (not run)"
  fi
  # NCCL on the one GPU: calibrate's curves between two workers sharing it, and a training
  # job's own probe over its NCCL groups (cluster.calibrate) with its device record.
  HOLMES_WORKERS_PER_GPU=2 timeout 600 "$dir/bin/holmes-train" calibrate --set job.device=cuda ${models[gpt2-124m]} \
    --set train.micro_batch=2 --set train.global_batch=8 --tp 1 --micro-batches 2 --reps 2 --nproc-per-node 2 \
    --out "$logs/cal_shared.yaml" >"$logs/calibrate_shared.log" 2>&1 \
    && grep -c 'transport: nccl' "$logs/cal_shared.yaml" | sed 's/^/plan shared GPU: NCCL curves /' \
    || echo "plan shared GPU: calibrate FAILED: $(tail -1 "$logs/calibrate_shared.log" | cut -c1-150)"
  HOLMES_WORKERS_PER_GPU=2 NCCL_DEBUG=WARN timeout 600 "$dir/bin/holmes-train" --nproc-per-node 2 --set job.device=cuda \
    --set parallel.nccl=on --set parallel.tensor=2 --set parallel.pipeline=1 --set parallel.data=1 --set train.steps=6 \
    --set train.micro_batch=4 --set train.global_batch=16 --set job.output_dir="$logs/probe-run" --set job.overwrite=true \
    --set cluster.calibrate="$logs/cal_probe.yaml" >"$logs/probe.log" 2>&1 || true
  python3 - "$logs/cal_probe.yaml" <<'PY' || echo "plan NCCL probe: FAILED (see probe.log)"
import sys, yaml
cal = yaml.safe_load(open(sys.argv[1]))
dev = cal["device"]
assert dev["kind"] == "cuda" and dev.get("nccl") and dev.get("cuda") and dev.get("date"), dev
link = cal["links"]["intra-node"]
print(f"plan NCCL probe: {dev['name']} driver {dev.get('driver')} CUDA {dev['cuda']} NCCL {dev['nccl']}: intra-node "
      f"{link['gbps_per_rank']:.4g} Gb/s per rank, {link['latency_us']:.3g} us (NCCL groups, device buffers)")
PY
}

case "$mode" in
  bundle) bundle ;;
  plan) dir=${2:-gpu-bundle}; plan_checks ;;
  run) run_checks ;;
  mask) mask_checks ;;
  profile) profile ;;
  extra) extra_checks ;;
  fp8) fp8_checks ;;
  *) echo "usage: scripts/gpu_check.sh bundle|run|mask|extra|fp8|profile [DIR]" >&2; exit 2 ;;
esac
