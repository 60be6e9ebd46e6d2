# SPDX-License-Identifier: Apache-2.0
"""The checked-in python/mlakv/_mlakv.pyi against the stub nanobind generates from
the built module: the same functions with the same parameters, and the same
module attributes, so the stub cannot drift (formatting, which differs between
nanobind versions, is not compared)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import mlakv

STUB = Path(mlakv.__file__).resolve().parent / "_mlakv.pyi"


def _surface(text: str) -> dict[str, tuple[str, ...]]:
    """name -> parameter names (functions, classes' methods as Class.method) or () (attributes)."""
    out: dict[str, tuple[str, ...]] = {}

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef):
                args = node.args
                names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
                out[prefix + node.name] = tuple(names)
            elif isinstance(node, ast.ClassDef):
                out[prefix + node.name] = ()
                visit(node.body, prefix + node.name + ".")
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mlakv"):
                for alias in node.names:  # a submodule, e.g. "from mlakv._mlakv import raw as raw"
                    out[prefix + (alias.asname or alias.name)] = ()
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out[prefix + node.target.id] = ()
            elif isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        out[prefix + target.id] = ()

    visit(ast.parse(text).body, "")
    return out


def test_checked_in_stub_has_the_generated_functions_and_parameters(tmp_path):
    pytest.importorskip("nanobind.stubgen")
    generated = tmp_path / "_mlakv.pyi"
    result = subprocess.run(
        [sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "mlakv._mlakv", "-o", str(generated)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    want = {k: v for k, v in _surface(generated.read_text()).items() if not k.startswith("__")}
    got = {k: v for k, v in _surface(STUB.read_text()).items() if not k.startswith("__")}
    assert got == want, f"regenerate {STUB.name}: python -m nanobind.stubgen -m mlakv._mlakv -o {STUB}"
