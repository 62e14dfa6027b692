"""Greedy token-by-token decoding of a tiny transformer, eager PyTorch (launch-bound).

    python3 prog.py [--tokens 256] [--prompt 32] [--layers 4]

A 4-layer transformer (d_model 512, 8 heads, vocabulary 8192, float32) decodes 256 new
tokens for one sequence (batch 1). The key/value cache grows by ``torch.cat`` every
token, so the attention shapes drift step by step (1 x 8 x 33..288 x 64), and the next
token is chosen on the GPU (argmax) and fed back without ever going to the host: there
is no synchronisation inside the loop. Each token is ~70 kernels of a few microseconds
each (GEMVs, layer norms, small softmaxes, concatenations), each launched separately
from Python (~30 us of host time per op), so the GPU is idle most of the time waiting for
the next launch: launch-bound by design (designed: GPU busy ~5-20 % while generating).

NVTX: one range ``prefill`` (the 32-token prompt), then ONE range ``generate`` around the
whole decoding loop (no per-token ranges): a tool has to find the ~256 iterations itself.
One synchronisation after the ``generate`` range, then the tokens go to the host.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

VOCAB, DIM, HEADS, MAX_LEN = 8192, 512, 8, 1024
HEAD_DIM = DIM // HEADS


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(DIM)
        self.qkv = torch.nn.Linear(DIM, 3 * DIM)
        self.proj = torch.nn.Linear(DIM, DIM)
        self.ln2 = torch.nn.LayerNorm(DIM)
        self.up = torch.nn.Linear(DIM, 4 * DIM)
        self.down = torch.nn.Linear(4 * DIM, DIM)

    def forward(self, x, cache):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(DIM, dim=-1)
        q = q.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        k = k.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        v = v.view(b, t, HEADS, HEAD_DIM).transpose(1, 2)
        if cache is not None:                       # the growing KV cache: new tensors
            k = torch.cat([cache[0], k], dim=2)     # every token, one position longer
            v = torch.cat([cache[1], v], dim=2)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(HEAD_DIM)
        if t > 1:                                   # causal mask for the prompt only
            mask = torch.ones(t, t, device=x.device, dtype=torch.bool).tril()
            att = att.masked_fill(~mask, float("-inf"))
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, t, DIM)
        x = x + self.proj(y)
        x = x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))
        return x, (k, v)


class TinyLM(torch.nn.Module):
    def __init__(self, layers: int) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.pos = torch.nn.Embedding(MAX_LEN, DIM)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(layers))
        self.ln = torch.nn.LayerNorm(DIM)
        self.head = torch.nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids, caches, pos: int):
        t = ids.shape[1]
        x = self.embed(ids) + self.pos(torch.arange(pos, pos + t, device=ids.device))
        new_caches = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, caches[i] if caches else None)
            new_caches.append(kv)
        return self.head(self.ln(x[:, -1])), new_caches


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--device", default="cuda", help=argparse.SUPPRESS)  # CPU check only
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device(args.device)
    model = TinyLM(args.layers).to(device).eval()
    prompt = torch.randint(0, VOCAB, (1, args.prompt), device=device)

    with torch.no_grad():
        torch.cuda.nvtx.range_push("prefill")
        logits, caches = model(prompt, None, 0)
        torch.cuda.nvtx.range_pop()

        started = time.perf_counter()
        generated = prompt
        pos = args.prompt
        torch.cuda.nvtx.range_push("generate")
        for _ in range(args.tokens):
            nxt = logits.argmax(-1, keepdim=True)           # greedy, stays on the GPU
            generated = torch.cat([generated, nxt], dim=1)
            logits, caches = model(nxt, caches, pos)
            pos += 1
        torch.cuda.nvtx.range_pop()
        if device.type == "cuda":
            torch.cuda.synchronize()
        wall = time.perf_counter() - started
        tokens = generated[0, args.prompt:].tolist()

    result = {"tokens": len(tokens), "layers": args.layers, "dim": DIM,
              "final_kv_len": int(caches[0][0].shape[2]),
              "ms_per_token": round(wall / args.tokens * 1e3, 4),
              "first_tokens": tokens[:8]}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
