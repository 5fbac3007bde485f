#!/usr/bin/env bash
# The data of configs/llama-tiny-mixture.yaml, from text every Debian machine has: two JSON
# Lines sources, one document per paragraph (runs of text between blank lines, 40 bytes to 4 KB):
#   prose   licenses and English manual pages (gzip-compressed JSON Lines)
#   code    C headers under /usr/include (zstd-compressed JSON Lines)
# each about MB megabytes, then tokenized by prepare-data with the byte tokenizer into
# OUT_DIR/prose.bin + prose.idx (Megatron's indexed dataset) and OUT_DIR/code.bin (llm.c).
# Files are taken in sorted order, so a machine makes the same data every time.
#   scripts/mixture_data.sh [BUILD_DIR] [OUT_DIR] [MB]   (defaults: build, data/mixture, 3)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-data/mixture}
mb=${3:-3}
bin=$build/holmes-train
[ -x "$bin" ] || { echo "mixture_data: no $bin (build it first: scripts/setup.sh)" >&2; exit 2; }
command -v zstd >/dev/null || { echo "mixture_data: needs zstd (apt install zstd)" >&2; exit 2; }
mkdir -p "$out"
python3 - "$out" "$mb" <<'PY'
import glob, gzip, json, os, sys

out, budget = sys.argv[1], int(float(sys.argv[2]) * 1e6)

def read(path):
    try:
        data = open(path, "rb").read()
        if path.endswith(".gz"):
            data = gzip.decompress(data)
    except (OSError, EOFError, gzip.BadGzipFile):
        return ""
    if b"\0" in data[:4096]:
        return ""
    return data.decode("utf-8", errors="replace")

def paragraphs(patterns):
    for pattern in patterns:
        for path in sorted(glob.glob(pattern, recursive=True)):
            if os.path.isfile(path):
                for p in read(path).split("\n\n"):
                    p = p.strip("\n")
                    if 40 <= len(p) <= 4000:
                        yield p

def write(name, patterns):
    size, docs = 0, []
    for p in paragraphs(patterns):
        docs.append(json.dumps({"text": p, "source": name}, ensure_ascii=False))
        size += len(p.encode())
        if size >= budget:
            break
    with open(f"{out}/{name}.jsonl", "w", encoding="utf-8") as f:
        f.write("\n".join(docs) + "\n")
    print(f"mixture_data: {name}: {len(docs)} documents, {size} bytes of text")

write("prose", ["/usr/share/common-licenses/*", "/usr/share/man/man1/*.gz", "/usr/share/man/man5/*.gz"])
write("code", ["/usr/include/**/*.h"])
PY
gzip -f "$out/prose.jsonl"
zstd -q -f --rm "$out/code.jsonl" -o "$out/code.jsonl.zst"
"$bin" prepare-data --input "$out/prose.jsonl.gz" --out "$out/prose.idx"
"$bin" prepare-data --input "$out/code.jsonl.zst" --out "$out/code.bin"
