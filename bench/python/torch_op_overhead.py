# SPDX-License-Identifier: Apache-2.0
"""Host time per call at T = 1 of the stock writer (run on purpose; results in bench/results/):
the raw extension entry (with the view tuples the Python op builds, prebuilt or built per call, and
the DLPack entry the Python function uses, capsules exported per call), the Python function
``mlakv.concat_and_cache_mla`` and the torch op ``torch.ops.mlakv.concat_and_cache_mla`` (the packet,
and its ``.default`` overload), registered in C++ (mlakv/_torch_ops.so, when built) or in Python
(``MLAKV_TORCH_OPS=python``): the report names which. CPU tensors time the host path; on a GPU
(``--device cuda``) a launch is asynchronous, so the time is the host's.

    python bench/python/torch_op_overhead.py --device cpu --json out.json
    MLAKV_TORCH_OPS=python python bench/python/torch_op_overhead.py --device cpu --json out-python.json
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time

import torch

import mlakv
import mlakv.torch  # noqa: F401  (registers torch.ops.mlakv)
from mlakv import _mlakv
from mlakv._arrays import export


def per_call_us(cases: dict, calls: int, repeats: int) -> dict:
    """Each case's best mean over `repeats` batches of `calls` calls, in microseconds. The batches of
    the cases alternate, so load from other processes falls on every case alike."""
    for fn in cases.values():
        for _ in range(calls // 10):
            fn()
    best = dict.fromkeys(cases, float("inf"))
    for _ in range(repeats):
        for name, fn in cases.items():
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            best[name] = min(best[name], (time.perf_counter() - start) / calls)
    return {name: t * 1e6 for name, t in best.items()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--format", default="fp8_ds_mla")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--slot", type=int, default=5, help="-1: the token is skipped (host path only)")
    parser.add_argument("--json")
    a = parser.parse_args()
    width = next(f["record_bytes"] for f in mlakv.formats() if f["id"] == a.format)
    dev = torch.device(a.device)
    kv_c = torch.randn(1, 512, dtype=torch.bfloat16, device=dev)
    k_pe = torch.randn(1, 1, 64, dtype=torch.bfloat16, device=dev)
    cache = torch.zeros(64, 64, width, dtype=torch.uint8, device=dev)
    slots = torch.tensor([a.slot], dtype=torch.int64, device=dev)
    scale = torch.ones(1, dtype=torch.float32, device=dev)
    op = torch.ops.mlakv.concat_and_cache_mla
    view = mlakv.torch._view
    stream = mlakv.torch._stream
    raw = _mlakv.raw.concat_and_cache_mla
    dlpack = _mlakv.concat_and_cache_mla

    def raw_views():
        raw(view(kv_c), view(k_pe), view(cache), view(slots), a.format, view(scale), stream(kv_c), True)

    prebuilt = (view(kv_c), view(k_pe), view(cache), view(slots), a.format, view(scale), stream(kv_c), True)

    def raw_prebuilt():
        raw(*prebuilt)

    def raw_dlpack():
        handle = torch.cuda.current_stream(dev).cuda_stream if kv_c.is_cuda else 0
        dlpack(export(kv_c), export(k_pe), export(cache), export(slots), a.format, export(scale), stream=handle)

    cases = {
        "raw_extension_prebuilt_views": raw_prebuilt,
        "raw_extension_views": raw_views,
        "raw_extension_dlpack": raw_dlpack,
        "python_function": lambda: mlakv.concat_and_cache_mla(kv_c, k_pe, cache, slots, a.format, scale),
        "torch_op": lambda: op(kv_c, k_pe, cache, slots, a.format, scale),
        "torch_op_overload": lambda: op.default(kv_c, k_pe, cache, slots, a.format, scale),
        # torch's own floor: a C++ op whose kernel does nearly nothing, called from Python.
        "aten_is_same_size": lambda: torch.ops.aten.is_same_size.default(slots, slots),
    }
    results = per_call_us(cases, a.calls, a.repeats)
    if kv_c.is_cuda:
        torch.cuda.synchronize()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    report = {
        "benchmark": "torch_op_overhead",
        "commit": commit,
        "device": a.device if not kv_c.is_cuda else torch.cuda.get_device_name(dev),
        "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__,
        "registration": mlakv.torch.REGISTRATION,
        "format": a.format,
        "tokens": 1,
        "slot": a.slot,
        "host_us_per_call": {k: round(v, 2) for k, v in results.items()},
        "torch_op_over_raw_views": round(results["torch_op"] / results["raw_extension_views"], 2),
        "torch_op_over_raw_prebuilt_views": round(results["torch_op"] / results["raw_extension_prebuilt_views"], 2),
        "torch_op_over_raw_dlpack": round(results["torch_op"] / results["raw_extension_dlpack"], 2),
    }
    print(json.dumps(report, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(report, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
