#!/usr/bin/python3
"""PyTorch reference for holmes-train's GPT (golden test).

Reads what holmes-golden-dump wrote (weights, size table, batches, logits, gradients,
losses), builds the same GPT-2 in PyTorch from the same weights, and compares:
  logits of step 0          max |diff| <= 1e-4 * max|ref| + 1e-6 (real vocabulary columns)
  loss of step 0            relative 1e-5
  every parameter gradient  max |diff| <= 1e-3 * max|ref| + 1e-7 per tensor
  losses of 10 AdamW steps  relative 1e-4 (torch.optim.AdamW + clip_grad_norm_, fp32)
Exit status 0 when everything is within tolerance, 1 otherwise.
Usage: golden_check.py DUMP_DIR
"""
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F


def read_meta(d):
    meta = {}
    for line in open(f"{d}/meta.txt"):
        key, value = line.split()
        meta[key] = float(value) if "." in value or "e" in value else int(value)
    return meta


def read_layout(d):
    """name -> (offset, numel, decay, shape) in the flat buffer."""
    layout = {}
    for line in open(f"{d}/layout.txt"):
        f = line.split()
        layout[f[0]] = (int(f[1]), int(f[2]), f[3] == "1", tuple(int(x) for x in f[4:]))
    return layout


class Gpt(torch.nn.Module):
    """GPT-2 with parameters named and shaped like holmes' layout ((out, in) weights)."""

    def __init__(self, flat, layout, meta):
        super().__init__()
        self.L, self.C, self.NH = meta["layers"], meta["hidden"], meta["heads"]
        self.V = meta["vocab"]
        self.params = torch.nn.ParameterDict()
        for name, (off, n, _, shape) in layout.items():
            t = torch.from_numpy(flat[off:off + n].copy()).reshape(shape)
            self.params[name.replace(".", "_")] = torch.nn.Parameter(t)

    def p(self, name):
        return self.params[name.replace(".", "_")]

    def forward(self, idx):
        B, T = idx.shape
        C, NH = self.C, self.NH
        x = self.p("wte")[idx] + self.p("wpe")[:T]
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
        for l in range(self.L):
            h = f"h.{l}."
            a = F.layer_norm(x, (C,), self.p(h + "ln_1.weight"), self.p(h + "ln_1.bias"), 1e-5)
            qkv = F.linear(a, self.p(h + "attn.c_attn.weight"), self.p(h + "attn.c_attn.bias"))
            q, k, v = qkv.split(C, dim=2)
            q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
            att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
            y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
            x = x + F.linear(y, self.p(h + "attn.c_proj.weight"), self.p(h + "attn.c_proj.bias"))
            a = F.layer_norm(x, (C,), self.p(h + "ln_2.weight"), self.p(h + "ln_2.bias"), 1e-5)
            a = F.gelu(F.linear(a, self.p(h + "mlp.c_fc.weight"), self.p(h + "mlp.c_fc.bias")), approximate="tanh")
            x = x + F.linear(a, self.p(h + "mlp.c_proj.weight"), self.p(h + "mlp.c_proj.bias"))
        x = F.layer_norm(x, (C,), self.p("ln_f.weight"), self.p("ln_f.bias"), 1e-5)
        return x @ self.p("wte").t()  # (B, T, Vp); columns >= V are padding


def loss_of(logits, targets, V):
    return F.cross_entropy(logits[..., :V].reshape(-1, V), targets.reshape(-1))


def main(d):
    torch.manual_seed(0)
    meta, layout = read_meta(d), read_layout(d)
    B, T, V, Vp, steps = meta["B"], meta["T"], meta["vocab"], meta["padded_vocab"], meta["steps"]
    flat = np.fromfile(f"{d}/params.bin", dtype=np.float32)
    tokens = torch.from_numpy(np.fromfile(f"{d}/tokens.bin", dtype=np.int32).astype(np.int64)).view(steps, B, T)
    targets = torch.from_numpy(np.fromfile(f"{d}/targets.bin", dtype=np.int32).astype(np.int64)).view(steps, B, T)
    ref_logits = torch.from_numpy(np.fromfile(f"{d}/logits.bin", dtype=np.float32)).view(B, T, Vp)
    ref_grads = np.fromfile(f"{d}/grads.bin", dtype=np.float32)
    ref_losses = [float(x) for x in open(f"{d}/losses.txt")]
    model = Gpt(flat, layout, meta)
    failures = []

    def check(what, ok, detail):
        print(f"{'ok  ' if ok else 'FAIL'} {what}: {detail}")
        if not ok:
            failures.append(what)

    logits = model(tokens[0])
    diff = (logits[..., :V] - ref_logits[..., :V]).abs().max().item()
    scale = logits[..., :V].abs().max().item()
    check("logits", diff <= 1e-4 * scale + 1e-6, f"max|diff| {diff:.3g} (max|logit| {scale:.3g})")
    loss = loss_of(logits, targets[0], V)
    rel = abs(loss.item() - ref_losses[0]) / abs(loss.item())
    check("loss", rel <= 1e-5, f"torch {loss.item():.7f} holmes {ref_losses[0]:.7f} rel {rel:.2g}")
    loss.backward()
    worst = 0.0
    for name, (off, n, _, shape) in layout.items():
        g = model.p(name).grad.numpy().reshape(-1)
        mine = ref_grads[off:off + n]
        diff, scale = float(np.abs(g - mine).max()), float(np.abs(g).max())
        worst = max(worst, diff / (scale + 1e-30))
        if diff > 1e-3 * scale + 1e-7:
            check(f"grad {name}", False, f"max|diff| {diff:.3g} max|grad| {scale:.3g}")
    check("gradients", worst <= 1e-3, f"{len(layout)} tensors, worst max|diff|/max|grad| {worst:.3g}")

    # 10 AdamW steps with clipping from the same initial weights.
    model = Gpt(flat, layout, meta)
    decay = [model.p(n) for n, v in layout.items() if v[2]]
    no_decay = [model.p(n) for n, v in layout.items() if not v[2]]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": meta["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=meta["lr"], betas=(meta["beta1"], meta["beta2"]), eps=meta["eps"])
    for step in range(steps):
        opt.zero_grad()
        loss = loss_of(model(tokens[step]), targets[step], V)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), meta["clip"])
        opt.step()
        rel = abs(loss.item() - ref_losses[step]) / abs(loss.item())
        check(f"AdamW step {step + 1} loss", rel <= 1e-4,
              f"torch {loss.item():.7f} holmes {ref_losses[step]:.7f} rel {rel:.2g}")
    print("golden: " + ("PASS" if not failures else f"FAIL ({len(failures)} checks)"))
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
