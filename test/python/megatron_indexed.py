"""An independent writer and reader of Megatron-LM's indexed dataset (PREFIX.bin + PREFIX.idx),
written with numpy from the format's description (docs/training.md), for the test that
holmes-train reads what Megatron's tools write and writes what they read.

  megatron_indexed.py write DOCS.txt PREFIX DTYPE   documents -> PREFIX.bin/.idx with ids as DTYPE
  megatron_indexed.py read PREFIX OUT.txt           PREFIX.bin/.idx -> documents

DOCS.txt / OUT.txt: one document per line, its sequences separated by " | ", ids by spaces.
"""
import struct
import sys

import numpy as np

CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7, "uint16": 8}
MAGIC = b"MMIDIDX\x00\x00"


def parse_docs(path):
    docs = []
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            docs.append([[int(x) for x in seq.split()] for seq in line.split(" | ")])
    return docs


def write(docs_path, prefix, dtype_name):
    dtype = np.dtype(dtype_name)
    docs = parse_docs(docs_path)
    lengths, pointers, doc_index = [], [], [0]
    offset = 0
    with open(prefix + ".bin", "wb") as bin_file:
        for doc in docs:
            for seq in doc:
                arr = np.array(seq, dtype=dtype)
                bin_file.write(arr.tobytes(order="C"))
                lengths.append(len(seq))
                pointers.append(offset)
                offset += arr.nbytes
            doc_index.append(len(lengths))
    with open(prefix + ".idx", "wb") as idx:
        idx.write(MAGIC)
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", CODES[dtype_name]))
        idx.write(struct.pack("<Q", len(lengths)))
        idx.write(struct.pack("<Q", len(doc_index)))
        idx.write(np.array(lengths, dtype=np.int32).tobytes(order="C"))
        idx.write(np.array(pointers, dtype=np.int64).tobytes(order="C"))
        idx.write(np.array(doc_index, dtype=np.int64).tobytes(order="C"))


def read(prefix, out_path):
    raw = open(prefix + ".idx", "rb").read()
    assert raw[:9] == MAGIC, "bad magic"
    version, = struct.unpack("<Q", raw[9:17])
    assert version == 1, f"version {version}"
    code = raw[17]
    dtype = np.dtype({v: k for k, v in CODES.items()}[code])
    seqs, = struct.unpack("<Q", raw[18:26])
    ndocs, = struct.unpack("<Q", raw[26:34])
    off = 34
    lengths = np.frombuffer(raw, dtype=np.int32, count=seqs, offset=off)
    off += lengths.nbytes
    pointers = np.frombuffer(raw, dtype=np.int64, count=seqs, offset=off)
    off += pointers.nbytes
    doc_index = np.frombuffer(raw, dtype=np.int64, count=ndocs, offset=off)
    off += doc_index.nbytes
    assert off == len(raw), f"{len(raw) - off} bytes after the document indices"
    data = np.memmap(prefix + ".bin", mode="r", dtype=np.uint8)
    with open(out_path, "w") as out:
        for d in range(ndocs - 1):
            parts = []
            for s in range(doc_index[d], doc_index[d + 1]):
                ids = np.frombuffer(data, dtype=dtype, count=lengths[s], offset=pointers[s])
                parts.append(" ".join(str(int(x)) for x in ids))
            out.write(" | ".join(parts) + "\n")


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        read(sys.argv[2], sys.argv[3])
