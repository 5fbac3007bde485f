#!/usr/bin/env python3
"""Checks a `holmes-train export` folder against GPT-2's conventions and recomputes the loss.

Usage: check_export.py EXPORT_DIR TOKEN_FILE --batch-size B --seq-len T --batches N --loss L

Reads model.safetensors itself (u64 header length, JSON header, raw tensors: no safetensors
or transformers package), checks tensor names and shapes and config.json the way Hugging Face's
GPT2LMHeadModel expects them, builds GPT-2 from the tensors with plain torch ops (Conv1D
x @ W + b, GELU tanh approximation, causal attention, LM head tied to wte) and computes the
mean next-token loss on the sequences `holmes-train eval` reads: chunk i = tokens[i*T : i*T+T+1],
batch k = chunks [k*B, (k+1)*B). Exits 1 unless it matches L within 1e-4 relative.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import torch
import torch.nn.functional as F

LLMC_MAGIC, LLMC_HEADER_BYTES = 20240520, 1024
REQUIRED_CONFIG = {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2", "activation_function": "gelu_new",
                   "layer_norm_epsilon": 1e-5, "n_inner": None}


def fail(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


def read_safetensors(path):
    """Returns ({name: float32 tensor}, metadata) after checking the layout rules of the format."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    if (8 + n) % 8:
        fail(f"header of {n} bytes leaves the data unaligned")
    meta = header.pop("__metadata__", None)
    data = blob[8 + n:]
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    pos = 0
    for begin, end, name in spans:  # safetensors forbids holes and overlaps
        if begin != pos:
            fail(f"{name}: data starts at {begin}, expected {pos}")
        pos = end
    if pos != len(data):
        fail(f"tensor data covers {pos} bytes, the file holds {len(data)}")
    tensors = {}
    for name, v in header.items():
        if v["dtype"] != "F32":
            fail(f"{name}: dtype {v['dtype']}, expected F32")
        begin, end = v["data_offsets"]
        arr = np.frombuffer(data, dtype="<f4", count=(end - begin) // 4, offset=begin)
        if arr.size != math.prod(v["shape"]):
            fail(f"{name}: {arr.size} values for shape {v['shape']}")
        tensors[name] = torch.from_numpy(arr.copy()).reshape(v["shape"])
    return tensors, meta


def expected_shapes(cfg):
    C, V, P, L = cfg["n_embd"], cfg["vocab_size"], cfg["n_positions"], cfg["n_layer"]
    shapes = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [P, C],
              "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
    for l in range(L):
        h = f"transformer.h.{l}."
        shapes.update({h + "ln_1.weight": [C], h + "ln_1.bias": [C], h + "ln_2.weight": [C], h + "ln_2.bias": [C],
                       h + "attn.c_attn.weight": [C, 3 * C], h + "attn.c_attn.bias": [3 * C],
                       h + "attn.c_proj.weight": [C, C], h + "attn.c_proj.bias": [C],
                       h + "mlp.c_fc.weight": [C, 4 * C], h + "mlp.c_fc.bias": [4 * C],
                       h + "mlp.c_proj.weight": [4 * C, C], h + "mlp.c_proj.bias": [C]})
    return shapes


def check_conventions(cfg, tensors, meta):
    for k, v in REQUIRED_CONFIG.items():
        if cfg.get(k) != v:
            fail(f"config.json {k} = {cfg.get(k)!r}, GPT-2 expects {v!r}")
    if cfg.get("n_ctx") != cfg["n_positions"] or cfg["n_embd"] % cfg["n_head"]:
        fail("config.json: n_ctx must equal n_positions and n_head divide n_embd")
    if cfg.get("tie_word_embeddings", True) is not True:
        fail("config.json: the head is tied to wte, tie_word_embeddings must be true")
    if meta != {"format": "pt"}:
        fail(f"__metadata__ = {meta!r}, expected {{'format': 'pt'}}")
    want = expected_shapes(cfg)
    got = {k: list(t.shape) for k, t in tensors.items()}
    if set(got) != set(want):  # lm_head.weight would be tolerated by HF but we promise not to write it
        fail(f"tensor names differ from GPT-2's: extra {sorted(set(got) - set(want))}, "
             f"missing {sorted(set(want) - set(got))}")
    for k, shape in want.items():
        if got[k] != shape:
            fail(f"{k}: shape {got[k]}, GPT-2 expects {shape}")


def read_tokens(path):
    raw = np.fromfile(path, dtype="<u2")
    head = np.frombuffer(raw[:LLMC_HEADER_BYTES // 2].tobytes(), dtype="<i4") if raw.size >= 512 else None
    if head is not None and head[0] == LLMC_MAGIC:
        return raw[LLMC_HEADER_BYTES // 2:LLMC_HEADER_BYTES // 2 + int(head[2])].astype(np.int64)
    return raw.astype(np.int64)


def gpt2_loss(w, cfg, idx, targets):
    """GPT-2 forward with plain torch ops. idx, targets: (B, T) int64. Returns the mean loss."""
    B, T = idx.shape
    C, NH, eps = cfg["n_embd"], cfg["n_head"], cfg["layer_norm_epsilon"]
    x = w["transformer.wte.weight"][idx] + w["transformer.wpe.weight"][:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    gelu = lambda u: 0.5 * u * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u ** 3)))
    for l in range(cfg["n_layer"]):
        p = lambda n: w[f"transformer.h.{l}.{n}"]
        h = F.layer_norm(x, (C,), p("ln_1.weight"), p("ln_1.bias"), eps)
        q, k, v = (h @ p("attn.c_attn.weight") + p("attn.c_attn.bias")).split(C, dim=2)
        q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))  # (B, NH, T, HS)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p("attn.c_proj.weight") + p("attn.c_proj.bias")
        h = F.layer_norm(x, (C,), p("ln_2.weight"), p("ln_2.bias"), eps)
        x = x + gelu(h @ p("mlp.c_fc.weight") + p("mlp.c_fc.bias")) @ p("mlp.c_proj.weight") + p("mlp.c_proj.bias")
    x = F.layer_norm(x, (C,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], eps)
    logits = x @ w["transformer.wte.weight"].T  # tied head
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir")
    ap.add_argument("tokens")
    ap.add_argument("--batch-size", type=int, required=True)
    ap.add_argument("--seq-len", type=int, required=True)
    ap.add_argument("--batches", type=int, required=True)
    ap.add_argument("--loss", type=float, required=True, help="holmes-train eval's loss")
    a = ap.parse_args()
    with open(os.path.join(a.export_dir, "config.json")) as f:
        cfg = json.load(f)
    tensors, meta = read_safetensors(os.path.join(a.export_dir, "model.safetensors"))
    check_conventions(cfg, tensors, meta)
    toks = torch.from_numpy(read_tokens(a.tokens))
    B, T = a.batch_size, a.seq_len
    losses = []
    with torch.no_grad():
        for k in range(a.batches):
            seqs = torch.stack([toks[i * T:i * T + T + 1] for i in range(k * B, (k + 1) * B)])
            losses.append(gpt2_loss(tensors, cfg, seqs[:, :-1], seqs[:, 1:]).item())
        # Sensitivity: the same batch with one square Conv1D weight left in Linear layout must
        # move the loss far beyond the tolerance, or the comparison could not catch a layout bug.
        wrong = dict(tensors)
        wrong["transformer.h.0.attn.c_proj.weight"] = tensors["transformer.h.0.attn.c_proj.weight"].T
        wrong_loss = gpt2_loss(wrong, cfg, seqs[:, :-1], seqs[:, 1:]).item()
    loss = sum(losses) / len(losses)
    rel = abs(loss - a.loss) / abs(a.loss)
    print(f"torch GPT-2 loss {loss:.7f}, holmes-train {a.loss:.7f}, relative difference {rel:.2e}")
    if not rel <= 1e-4:
        fail("losses differ by more than 1e-4 relative")
    wrong_rel = abs(wrong_loss - losses[-1]) / abs(losses[-1])
    print(f"sensitivity: h.0.attn.c_proj untransposed moves the last batch's loss by {wrong_rel:.2e} relative")
    if not wrong_rel > 1e-3:
        fail("a transposed weight barely changes the loss: the model is too close to its init for this check")
    print(f"OK: {len(tensors)} tensors with GPT-2 names and shapes, config.json as GPT2LMHeadModel expects")


if __name__ == "__main__":
    main()
