#!/usr/bin/python3
"""PyTorch side of scripts/bench_vs_pytorch.sh: times a GPT-2 training step (forward,
backward, clip_grad_norm_, AdamW) in fp32 on the CPU, the same work holmes-model-bench does.
Usage: bench_torch.py L C NH V B T [steps] [warmup]
Prints: torch: tokens_per_s=... ms_per_step=... peak_rss_mb=..."""
import math
import resource
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x, mask):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // self.NH))
        att = att.masked_fill(mask[:T, :T] == 0, float("-inf")).softmax(dim=-1)
        x = x + self.attn_proj((att @ v).transpose(1, 2).contiguous().view(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt(nn.Module):
    def __init__(self, L, C, NH, V, max_T):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(max_T, C)
        self.h = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.register_buffer("mask", torch.tril(torch.ones(max_T, max_T)))
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x, self.mask)
        logits = self.ln_f(x) @ self.wte.weight.t()  # LM head tied to the embedding
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def main():
    L, C, NH, V, B, T = (int(a) for a in sys.argv[1:7])
    steps = int(sys.argv[7]) if len(sys.argv) > 7 else 10
    warmup = int(sys.argv[8]) if len(sys.argv) > 8 else 2
    torch.manual_seed(1)
    model = Gpt(L, C, NH, V, max(T, 1024))
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, foreach=True)
    idx = (torch.arange(B * T) * 7919 % V).view(B, T)
    tgt = ((torch.arange(B * T) * 104729 + 13) % V).view(B, T)
    total = 0.0
    for s in range(warmup + steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if s >= warmup:
            total += time.perf_counter() - t0
    ms = 1e3 * total / steps
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"torch: threads={torch.get_num_threads()} tokens_per_s={B * T / (ms / 1e3):.1f} "
          f"ms_per_step={ms:.1f} peak_rss_mb={rss:.0f} loss={loss.item():.4f}")


if __name__ == "__main__":
    torch.set_num_threads(int(__import__("os").environ.get("BENCH_THREADS", "2")))
    main()
