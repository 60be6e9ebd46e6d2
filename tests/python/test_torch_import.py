# SPDX-License-Identifier: Apache-2.0
"""Lazy torch: ``import mlakv`` never imports torch (this runs without torch too), and a torch too old
for the ops' registration fails at ``import mlakv.torch`` with one clear error, never at ``import mlakv``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_import_mlakv_leaves_torch_out_of_sys_modules():
    out = run(
        "import sys, mlakv, mlakv.attention, mlakv.kv_cache, mlakv.integrations.vllm\n"
        "mlakv.formats(); mlakv.integrations.vllm.MlaKvCacheWriter('nvfp4_ds_mla', fp8_rope=True)\n"
        "print('torch' in sys.modules)"
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False"]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_too_old_torch_fails_at_import_mlakv_torch_with_one_clear_error():
    out = run(
        "import torch\ntorch.__version__ = '2.3.1'\nimport mlakv\nprint(mlakv.formats()[0]['id'])\nimport mlakv.torch\n"
    )
    assert out.stdout.split() == ["bf16"], "import mlakv works whatever the torch"
    assert out.stderr.strip().splitlines()[-1] == (
        "ImportError: mlakv.torch needs torch >= 2.4 (torch.library.register_fake), found torch 2.3.1; "
        "mlakv itself works without it"
    )
