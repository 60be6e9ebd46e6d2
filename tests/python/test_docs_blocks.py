# SPDX-License-Identifier: Apache-2.0
"""Every code block of README.md and docs/**/*.md that claims to run, runs verbatim.

The rule, for whoever writes a block:

- A ```python block always runs: its text, unchanged, as a script in a fresh
  interpreter (this test's ``sys.executable``) in an empty temporary directory.
- A ```bash block runs when every command in it (each non-blank line that is not
  a comment) calls the installed ``mlakv`` command; a block with anything else
  (``bash scripts/...``, ``pip install``, ``cmake``, a build output) is an install
  or a build and is not run here (scripts/test runs those).
- Usage synopses (``mlakv formats [--fields]``) and other text that is not a
  command are fenced ```text (or left without a language), never ```bash.
- ```cpp blocks (fragments on a caller's buffers; tests/cmake/find_package builds a
  real consumer), ```json schemas and unlabelled byte tables are not run.
- An HTML comment on the line right above the fence, invisible on the rendered
  page, states what the block needs, e.g. ``<!-- docs-test: torch cuda -->``:
  ``torch`` (skipped when torch does not import), ``cuda`` (skipped without a CUDA
  device torch can see), ``torchrun`` (run with ``torch.distributed.run``, one
  process per visible GPU), ``files dump.bin`` (this test writes that input
  first, see ``_FILES``). There is no marker that skips a block.

A block that raises, exits non-zero or does not parse fails its case, named
``<file>:<line of its fence>``.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
MARKER = re.compile(r"<!--\s*docs-test:\s*(.*?)\s*-->")
KNOWN_NEEDS = {"torch", "cuda", "torchrun", "files"}
TIMEOUT_S = 600


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    language: str
    text: str
    needs: list[str]

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def extract_blocks(path: Path) -> list[Block]:
    """The fenced blocks of a markdown file, with the docs-test marker right above each."""
    blocks: list[Block] = []
    lines = path.read_text().splitlines()
    i = 0
    while i < len(lines):
        fence = re.match(r"^(\s*)(`{3,})(\S*)\s*$", lines[i])
        if not fence:
            i += 1
            continue
        indent, ticks, language = fence.groups()
        end = i + 1
        while end < len(lines) and lines[end].strip() != ticks:
            end += 1
        marker = MARKER.search(lines[i - 1]) if i > 0 else None
        body = [line[len(indent) :] if line.startswith(indent) else line for line in lines[i + 1 : end]]
        text = "\n".join(body) + "\n"
        blocks.append(Block(path, i + 1, language.lower(), text, marker.group(1).split() if marker else []))
        i = end + 1
    return blocks


def is_cli_block(text: str) -> bool:
    """A bash block whose every command calls the installed ``mlakv`` command."""
    commands = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return bool(commands) and all(re.match(r"^mlakv(\s|$)", command) for command in commands)


def runnable_blocks() -> list[Block]:
    blocks = [b for path in DOCUMENTS for b in extract_blocks(path)]
    return [b for b in blocks if b.language == "python" or (b.language in ("bash", "sh") and is_cli_block(b.text))]


def _write_dump(directory: Path) -> None:
    """dump.bin: the README quick start's [16, 64, 368] nvfp4_ds_mla_fp8_rope cache (slots 0, 1 and 70 written)."""
    import ml_dtypes
    import numpy as np

    from mlakv.kv_cache import concat_and_cache_nvfp4_mla_fp8_rope

    rng = np.random.default_rng(0)
    cache = np.zeros((16, 64, 368), np.uint8)
    kv_c = rng.standard_normal((4, 512)).astype(ml_dtypes.bfloat16)
    k_pe = rng.standard_normal((4, 64)).astype(ml_dtypes.bfloat16)
    concat_and_cache_nvfp4_mla_fp8_rope(kv_c, k_pe, cache, np.array([0, 1, -1, 70]))
    cache.tofile(directory / "dump.bin")


def _write_activations(directory: Path) -> None:
    """activations/: an engine's kv_c.npy [T, 512] and k_pe.npy [T, 64] (float32, finite)."""
    import numpy as np

    rng = np.random.default_rng(0)
    (directory / "activations").mkdir()
    np.save(directory / "activations" / "kv_c.npy", rng.standard_normal((256, 512)).astype(np.float32))
    np.save(directory / "activations" / "k_pe.npy", rng.standard_normal((256, 64)).astype(np.float32))


# The inputs a block may name with "files": what a reader brings along (their cache dump, their activations).
_FILES = {"dump.bin": _write_dump, "activations/": _write_activations}


def _needs(block: Block) -> tuple[set[str], list[str]]:
    words, files = set(), []
    for word in block.needs:
        if words and "files" in words and word not in KNOWN_NEEDS:
            files.append(word)
        else:
            words.add(word)
    return words, files


def _skip_reason(words: set[str]) -> str | None:
    if words & {"torch", "cuda", "torchrun"} and importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    if words & {"cuda", "torchrun"}:
        import torch

        if not torch.cuda.is_available():
            return "no CUDA device"
    return None


BLOCKS = runnable_blocks()


def test_the_rule_finds_the_documents_runnable_blocks():
    # Pins the extraction itself: README's quick start and CLI lines are among the blocks run.
    names = {b.path.name: [] for b in BLOCKS}
    for b in BLOCKS:
        names[b.path.name].append(b.language)
    assert "python" in names["README.md"] and "bash" in names["README.md"]
    assert "integrating.md" in names
    for b in BLOCKS:
        words, files = _needs(b)
        assert words <= KNOWN_NEEDS, f"{b.name}: unknown docs-test need {sorted(words - KNOWN_NEEDS)}"
        assert set(files) <= set(_FILES), f"{b.name}: no input named {sorted(set(files) - set(_FILES))}"


def test_a_bash_block_runs_only_when_it_calls_the_cli():
    assert is_cli_block("mlakv formats --fields   # the registry\nmlakv capacity --model glm-5\n")
    assert not is_cli_block("bash scripts/main\n")
    assert not is_cli_block("mlakv formats\npip install .\n")
    assert not is_cli_block("# only a comment\n")


def run_block(block: Block, directory: Path) -> subprocess.CompletedProcess:
    words, files = _needs(block)
    for name in files:
        _FILES[name](directory)
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    if block.language == "python":
        script = directory / "block.py"
        script.write_text(block.text)
        command = [sys.executable, str(script)]
        if "torchrun" in words:
            import torch

            gpus = torch.cuda.device_count()
            command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={gpus}"]
            command.append(str(script))
    else:
        command = ["bash", "-euo", "pipefail", "-c", block.text]
    return subprocess.run(command, cwd=directory, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)


def test_a_broken_block_fails(tmp_path):
    # The runner reports a failing block as failing: an undefined input, as the old README's torch block had.
    broken = Block(ROOT / "README.md", 1, "python", "import mlakv\nmlakv.gather_records(fmt, cache, slots)\n", [])
    result = run_block(broken, tmp_path)
    assert result.returncode != 0 and "NameError: name 'fmt' is not defined" in result.stderr


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_documented_block_runs_verbatim(block, tmp_path):
    words, _ = _needs(block)
    reason = _skip_reason(words)
    if reason:
        pytest.skip(f"{block.name} needs {' '.join(sorted(words))}: {reason}")
    if block.language != "python" and shutil.which("mlakv", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("the mlakv command is not installed next to this Python")
    result = run_block(block, tmp_path)
    assert result.returncode == 0, (
        f"{block.name} ({block.language}) exited {result.returncode}\n"
        f"--- block ---\n{block.text}--- stdout ---\n{result.stdout[-4000:]}\n--- stderr ---\n{result.stderr[-4000:]}"
    )
