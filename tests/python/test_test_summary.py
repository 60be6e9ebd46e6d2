# SPDX-License-Identifier: Apache-2.0
"""scripts/test's closing line: scripts/test_summary.py adds up the stages' counts."""

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "test_summary.py"


def summary(tmp_path: Path, *logs: tuple[str, str]) -> str:
    args = []
    for i, (text, suffix) in enumerate(logs):
        path = tmp_path / f"stage{i}.log"
        path.write_text(text)
        args.append(str(path) + suffix)
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


CTEST_CLEAN = "100% tests passed out of 5\n\nThe following tests did not run:\n\t  3 - gpu.a (Skipped)\n"
CTEST_FAILED = "60% tests passed, 2 tests failed out of 5\n\nThe following tests FAILED:\n\t  4 - b (Failed)\n"
PYTEST = "....s\n4 passed, 1 skipped in 0.12s\n"


def test_ctest_and_pytest_counts_add_up_with_skipped_tests_apart(tmp_path):
    assert summary(tmp_path, (CTEST_CLEAN, ""), (PYTEST, "")) == "tests: 8 passed, 0 failed, 2 skipped"


def test_failed_tests_are_counted_in_either_runner(tmp_path):
    pytest_failed = "F...\n1 failed, 3 passed in 0.20s\n"
    assert summary(tmp_path, (CTEST_FAILED, "!"), (pytest_failed, "!")) == "tests: 6 passed, 3 failed, 0 skipped"


def test_a_stage_without_a_closing_line_counts_as_one_failure(tmp_path):
    assert summary(tmp_path, ("configure error\n", "!"), (PYTEST, "")) == "tests: 4 passed, 1 failed, 1 skipped"


def test_a_failed_stage_whose_tests_all_passed_counts_one_failure(tmp_path):
    # the sanitizer stage: its ctest passed, a fuzz target then found something
    assert summary(tmp_path, (CTEST_CLEAN + "fuzz: crash\n", "!")) == "tests: 4 passed, 1 failed, 1 skipped"
