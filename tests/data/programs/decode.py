"""Token-by-token greedy decoding of a small GPT, batch 1, with a KV cache (eager PyTorch).

    python3 decode.py [--tokens 64]

Each new token runs the whole model on one position: about a hundred tiny kernels
(a few microseconds each), launched one by one from Python, then an argmax and an
end-of-sequence check with ``.item()``, as generation loops do. The GPU finishes every
kernel long before the host has launched the next: launch-bound.
NVTX: ``prefill``, then ``generate`` holding one ``token N`` range per new token.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import torch

VOCAB, DIM, HEADS, LAYERS, MAX_LEN = 4096, 384, 6, 6, 512


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln1 = torch.nn.LayerNorm(DIM)
        self.qkv = torch.nn.Linear(DIM, 3 * DIM)
        self.proj = torch.nn.Linear(DIM, DIM)
        self.ln2 = torch.nn.LayerNorm(DIM)
        self.up = torch.nn.Linear(DIM, 4 * DIM)
        self.down = torch.nn.Linear(4 * DIM, DIM)

    def forward(self, x, cache_k, cache_v, pos: int):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(DIM, dim=-1)
        q = q.view(b, t, HEADS, -1).transpose(1, 2)
        cache_k[:, :, pos:pos + t] = k.view(b, t, HEADS, -1).transpose(1, 2)
        cache_v[:, :, pos:pos + t] = v.view(b, t, HEADS, -1).transpose(1, 2)
        keys, values = cache_k[:, :, :pos + t], cache_v[:, :, :pos + t]
        att = (q @ keys.transpose(-1, -2)) / math.sqrt(DIM // HEADS)
        if t > 1:
            mask = torch.ones(t, pos + t, device=x.device, dtype=torch.bool).tril(pos)
            att = att.masked_fill(~mask, float("-inf"))
        y = (att.softmax(-1) @ values).transpose(1, 2).reshape(b, t, DIM)
        x = x + self.proj(y)
        return x + self.down(torch.nn.functional.gelu(self.up(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, DIM)
        self.pos = torch.nn.Embedding(MAX_LEN, DIM)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln = torch.nn.LayerNorm(DIM)
        self.head = torch.nn.Linear(DIM, VOCAB, bias=False)

    def forward(self, ids, caches, pos: int):
        t = ids.shape[1]
        x = self.embed(ids) + self.pos(torch.arange(pos, pos + t, device=ids.device))
        for block, (k, v) in zip(self.blocks, caches, strict=True):
            x = block(x, k, v, pos)
        return self.head(self.ln(x[:, -1]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--prompt", type=int, default=32)
    parser.add_argument("--result")
    args = parser.parse_args()

    torch.manual_seed(0)
    device = torch.device("cuda")
    model = GPT().to(device).eval()
    eos = VOCAB - 1
    caches = [(torch.zeros(1, HEADS, MAX_LEN, DIM // HEADS, device=device),
               torch.zeros(1, HEADS, MAX_LEN, DIM // HEADS, device=device))
              for _ in range(LAYERS)]
    ids = torch.randint(0, VOCAB - 1, (1, args.prompt), device=device)
    out = []
    with torch.no_grad():
        torch.cuda.nvtx.range_push("prefill")
        logits = model(ids, caches, 0)
        torch.cuda.nvtx.range_pop()
        pos = args.prompt
        started = time.perf_counter()
        torch.cuda.nvtx.range_push("generate")
        for i in range(args.tokens):
            torch.cuda.nvtx.range_push(f"token {i}")
            nxt = logits.argmax(-1, keepdim=True)
            if nxt.item() == eos:        # the end-of-sequence check: one sync a token
                torch.cuda.nvtx.range_pop()
                break
            out.append(nxt)
            logits = model(nxt, caches, pos)
            pos += 1
            torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        wall = time.perf_counter() - started
    result = {"tokens": len(out), "ms_per_token": round(wall / max(len(out), 1) * 1e3, 3)}
    print(json.dumps(result))
    if args.result:
        with open(args.result, "w") as fh:
            json.dump(result, fh)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
