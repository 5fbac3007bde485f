#!/usr/bin/env python3
"""Checks a `holmes-train export` of a llama model against LlamaForCausalLM's conventions and
recomputes the loss with an independent plain-PyTorch Llama (no transformers).

Usage: check_export_llama.py EXPORT_DIR TOKEN_FILE --batch-size B --seq-len T --batches N --loss L
       check_export_llama.py EXPORT_DIR --shard OUT_DIR   (writes EXPORT_DIR as two safetensors
       shards + model.safetensors.index.json + config.json into OUT_DIR, as HF's save_pretrained
       does for large models)

The model is written here from the Llama paper and Hugging Face's documented conventions:
RMSNorm x / sqrt(mean(x^2) + eps) * w; rotary embeddings in the rotate-half form q * cos +
[-q2, q1] * sin with angle t * theta^(-2i/HS) (angles in float64, as holmes-train computes
its table); grouped-query attention by repeating each key/value head for its NH/KVH query
heads; SwiGLU down(silu(gate(x)) * up(x)); no biases; the LM head lm_head.weight (or the token
embedding when tie_word_embeddings). Mean next-token loss on the sequences `holmes-train eval`
reads (chunk i = tokens[i*T : i*T+T+1], batch k = chunks [k*B, (k+1)*B)). Exits 1 unless it
matches L within 1e-5 relative, or when a wrongly permuted or transposed tensor would not move
the loss (so the comparison could not catch a layout bug).
"""
import argparse
import json
import math
import os
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_export import fail, read_safetensors, read_tokens  # noqa: E402  (the GPT-2 checker's readers)

REQUIRED_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
                   "attention_bias": False, "mlp_bias": False, "rope_scaling": None}


def expected_shapes(cfg):
    C, V, L, F_ = cfg["hidden_size"], cfg["vocab_size"], cfg["num_hidden_layers"], cfg["intermediate_size"]
    HS = C // cfg["num_attention_heads"]
    KV = cfg["num_key_value_heads"] * HS
    shapes = {"model.embed_tokens.weight": [V, C], "model.norm.weight": [C]}
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = [V, C]
    for l in range(L):
        p = f"model.layers.{l}."
        shapes.update({p + "input_layernorm.weight": [C], p + "post_attention_layernorm.weight": [C],
                       p + "self_attn.q_proj.weight": [C, C], p + "self_attn.k_proj.weight": [KV, C],
                       p + "self_attn.v_proj.weight": [KV, C], p + "self_attn.o_proj.weight": [C, C],
                       p + "mlp.gate_proj.weight": [F_, C], p + "mlp.up_proj.weight": [F_, C],
                       p + "mlp.down_proj.weight": [C, F_]})
    return shapes


def check_conventions(cfg, tensors, meta):
    for k, v in REQUIRED_CONFIG.items():
        if cfg.get(k) != v:
            fail(f"config.json {k} = {cfg.get(k)!r}, LlamaForCausalLM as exported expects {v!r}")
    C, NH, KVH = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    if C % NH or NH % KVH or cfg.get("head_dim", C // NH) != C // NH:
        fail("config.json: num_attention_heads must divide hidden_size, num_key_value_heads divide "
             "num_attention_heads, head_dim = hidden_size / num_attention_heads")
    if meta != {"format": "pt"}:
        fail(f"__metadata__ = {meta!r}, expected {{'format': 'pt'}}")
    want = expected_shapes(cfg)
    got = {k: list(t.shape) for k, t in tensors.items()}
    if set(got) != set(want):
        fail(f"tensor names differ from LlamaForCausalLM's: extra {sorted(set(got) - set(want))}, "
             f"missing {sorted(set(want) - set(got))}")
    for k, shape in want.items():
        if got[k] != shape:
            fail(f"{k}: shape {got[k]}, LlamaForCausalLM expects {shape}")


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rotary(x, theta):
    """x (B, H, T, HS): each head turned by its position, rotate-half pairing (i, i + HS/2)."""
    T, HS = x.shape[2], x.shape[3]
    half = HS // 2
    inv_freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / HS)
    angle = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    cos = torch.cat([angle.cos(), angle.cos()], -1).float()
    sin = torch.cat([angle.sin(), angle.sin()], -1).float()
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


def llama_loss(w, cfg, idx, targets):
    B, T = idx.shape
    C, NH, KVH = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    HS, eps, theta = C // NH, cfg["rms_norm_eps"], cfg["rope_theta"]
    x = w["model.embed_tokens.weight"][idx]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for l in range(cfg["num_hidden_layers"]):
        p = lambda n: w[f"model.layers.{l}.{n}"]
        h = rms_norm(x, p("input_layernorm.weight"), eps)
        q = (h @ p("self_attn.q_proj.weight").T).view(B, T, NH, HS).transpose(1, 2)
        k = (h @ p("self_attn.k_proj.weight").T).view(B, T, KVH, HS).transpose(1, 2)
        v = (h @ p("self_attn.v_proj.weight").T).view(B, T, KVH, HS).transpose(1, 2)
        q, k = rotary(q, theta), rotary(k, theta)
        k, v = k.repeat_interleave(NH // KVH, dim=1), v.repeat_interleave(NH // KVH, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(HS)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ p("self_attn.o_proj.weight").T
        h = rms_norm(x, p("post_attention_layernorm.weight"), eps)
        mlp = F.silu(h @ p("mlp.gate_proj.weight").T) * (h @ p("mlp.up_proj.weight").T)
        x = x + mlp @ p("mlp.down_proj.weight").T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    logits = x @ head.T
    return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(-1))


def write_shards(export_dir, out_dir):
    """Two safetensors files (the tensors split in header order) + index, as save_pretrained does."""
    with open(os.path.join(export_dir, "model.safetensors"), "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    header.pop("__metadata__", None)
    data = blob[8 + n:]
    names = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    os.makedirs(out_dir, exist_ok=True)
    weight_map = {}
    halves = (names[:len(names) // 2], names[len(names) // 2:])
    for i, part in enumerate(halves):
        fname = f"model-{i + 1:05d}-of-{len(halves):05d}.safetensors"
        hdr, chunks, pos = {"__metadata__": {"format": "pt"}}, [], 0
        for k in part:
            b, e = header[k]["data_offsets"]
            hdr[k] = {"dtype": header[k]["dtype"], "shape": header[k]["shape"], "data_offsets": [pos, pos + e - b]}
            chunks.append(data[b:e])
            pos += e - b
            weight_map[k] = fname
        text = json.dumps(hdr, separators=(",", ":")).encode("utf-8")  # compact, as HF writes it
        text += b" " * ((8 - (8 + len(text)) % 8) % 8)
        with open(os.path.join(out_dir, fname), "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": len(data)}, "weight_map": weight_map}, f)
    with open(os.path.join(export_dir, "config.json")) as src, open(os.path.join(out_dir, "config.json"), "w") as dst:
        dst.write(src.read())
    print(f"wrote {len(names)} tensors as 2 shards + index into {out_dir}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("export_dir")
    ap.add_argument("tokens", nargs="?")
    ap.add_argument("--shard")
    ap.add_argument("--batch-size", type=int)
    ap.add_argument("--seq-len", type=int)
    ap.add_argument("--batches", type=int)
    ap.add_argument("--loss", type=float, help="holmes-train eval's loss")
    a = ap.parse_args()
    if a.shard:
        write_shards(a.export_dir, a.shard)
        return
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
            losses.append(llama_loss(tensors, cfg, seqs[:, :-1], seqs[:, 1:]).item())
        inp, tgt = seqs[:, :-1], seqs[:, 1:]
        # Sensitivity: the permutation a checkpoint in Meta's interleaved rotary convention
        # would need (pairs (2i, 2i+1) instead of (i, i + HS/2)) applied to every layer's q_proj
        # and k_proj, and o_proj transposed: each must move the loss by more than ten times the
        # tolerance.
        HS = cfg["hidden_size"] // cfg["num_attention_heads"]
        perm = torch.cat([torch.arange(0, HS, 2), torch.arange(1, HS, 2)])
        def permuted(t):
            heads = t.shape[0] // HS
            return t.view(heads, HS, -1)[:, perm].reshape(t.shape)
        L = cfg["num_hidden_layers"]
        checks = {"q_proj and k_proj in interleaved rotary order": {
                      f"model.layers.{l}.self_attn.{n}_proj.weight":
                      permuted(tensors[f"model.layers.{l}.self_attn.{n}_proj.weight"]) for l in range(L) for n in "qk"},
                  "o_proj transposed": {"model.layers.0.self_attn.o_proj.weight":
                                        tensors["model.layers.0.self_attn.o_proj.weight"].T.contiguous()}}
        moved = {}
        for what, change in checks.items():
            wrong = dict(tensors)
            wrong.update(change)
            moved[what] = abs(llama_loss(wrong, cfg, inp, tgt).item() - losses[-1]) / abs(losses[-1])
    loss = sum(losses) / len(losses)
    rel = abs(loss - a.loss) / abs(a.loss)
    print(f"torch Llama loss {loss:.8f}, holmes-train {a.loss:.8f}, relative difference {rel:.2e}")
    if not rel <= 1e-5:
        fail("losses differ by more than 1e-5 relative")
    for what, r in moved.items():
        print(f"sensitivity: {what} moves the last batch's loss by {r:.2e} relative")
        if not r > 1e-4:
            fail(f"{what} moves the loss by less than 10 x the 1e-5 tolerance: the check could not catch "
                 "that layout bug")
    print(f"OK: {len(tensors)} tensors with LlamaForCausalLM names and shapes, config.json as it expects")


if __name__ == "__main__":
    main()
