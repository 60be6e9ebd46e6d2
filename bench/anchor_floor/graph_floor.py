"""The anchor's timing floor: a CUDA graph of 1, 2 or 3 one-element kernels, timed as
../shared/anchors/flashmla/bench.py times a decode (triton do_bench median of graph replays, L2
flushed before each). A decode + merge graph cannot take less than the 2-kernel figure."""
import json
import os

import torch
from triton.testing import do_bench

WARMUP_MS, REP_MS = 25, 100  # bench.py's


def graph_of(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    gr = torch.cuda.CUDAGraph()
    with torch.cuda.graph(gr):
        fn()
    torch.cuda.synchronize()
    return gr


x = torch.zeros(1, device="cuda")
out = {}
for kernels in (1, 2, 3):
    def fn(n=kernels):
        for _ in range(n):
            x.add_(1.0)
    gr = graph_of(fn)
    ts = [do_bench(gr.replay, warmup=WARMUP_MS, rep=REP_MS, return_mode="median") * 1e3 for _ in range(3)]
    out[f"{kernels}_kernels_us"] = ts
    print(f"graph of {kernels} one-element kernel(s): median us per pass {', '.join(f'{t:.2f}' for t in ts)}")
with open(os.path.join(os.environ.get("OUT", "/tmp"), "graph_floor.json"), "w") as f:
    json.dump(out, f, indent=1)
