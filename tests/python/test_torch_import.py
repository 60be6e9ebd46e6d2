# SPDX-License-Identifier: Apache-2.0
"""Lazy torch: ``import mlakv`` never imports torch (this runs without torch too), and a torch too old
for the ops' registration fails at ``import mlakv.torch`` with one clear error, never at ``import mlakv``."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

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


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_a_torch_ops_library_that_does_not_load_warns_and_registers_the_python_kernels(tmp_path):
    """A _torch_ops.so built against another torch: a RuntimeWarning and the Python kernels, or with
    MLAKV_TORCH_OPS=cpp one ImportError; never a silent switch."""
    package = Path(importlib.util.find_spec("mlakv").origin).parent
    shutil.copytree(package, tmp_path / "mlakv", ignore=shutil.ignore_patterns("_torch_ops.so", "__pycache__"))
    (tmp_path / "mlakv" / "_torch_ops.so").write_bytes(b"not a shared library")
    code = "import torch, mlakv.torch\nprint(mlakv.torch.REGISTRATION)"
    env = {k: v for k, v in os.environ.items() if k != "MLAKV_TORCH_OPS"}
    env["PYTHONPATH"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["python"]
    assert "RuntimeWarning: mlakv.torch: _torch_ops.so does not load into torch" in out.stderr
    env["MLAKV_TORCH_OPS"] = "cpp"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: MLAKV_TORCH_OPS=cpp: _torch_ops.so does not load into torch"), last
