# SPDX-License-Identifier: Apache-2.0
"""Adds up the counts of the test stages' logs (ctest's and pytest's closing
lines) into the one line scripts/test ends with:
"tests: N passed, N failed, N skipped". A log without a closing line counts as
one failure (its stage did not finish), and so does a stage that failed (its
path given with a trailing "!") without a failed test in its log (a fuzz
target's finding, say)."""

import re
import sys


def ctest_counts(text: str) -> tuple[int, int, int] | None:
    # "100% tests passed out of 477" (newer ctest, none failed) or "98% tests passed, 4 tests failed out of 196"
    m = re.search(r"(\d+)% tests passed(?:, (\d+) tests? failed)? out of (\d+)", text)
    if not m:
        return None
    failed, total = int(m.group(2) or 0), int(m.group(3))
    skipped = len(re.findall(r"^\s*\d+ - .*\(Skipped\)\s*$", text, re.M))
    return total - failed - skipped, failed, skipped


def pytest_counts(text: str) -> tuple[int, int, int] | None:
    lines = [ln for ln in text.splitlines() if re.search(r"\b(passed|failed|error|errors|skipped)\b", ln)]
    if not lines or not re.search(r" in [\d.]+s", lines[-1]):
        return None
    last = lines[-1]

    def count(word: str) -> int:
        m = re.search(rf"(\d+) {word}\b", last)
        return int(m.group(1)) if m else 0

    return count("passed"), count("failed") + count("errors?"), count("skipped")


def main(paths: list[str]) -> None:
    passed = failed = skipped = 0
    for arg in paths:
        path, stage_failed = arg.removesuffix("!"), arg.endswith("!")
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            text = ""
        counts = ctest_counts(text) if "tests passed" in text else pytest_counts(text)
        if counts is None:
            print(f"mlakv: {path}: no closing line (the stage did not finish)", file=sys.stderr)
            counts = (0, 1, 0)
        elif stage_failed and counts[1] == 0:
            print(f"mlakv: {path}: the stage failed outside its counted tests", file=sys.stderr)
            counts = (counts[0], 1, counts[2])
        passed, failed, skipped = passed + counts[0], failed + counts[1], skipped + counts[2]
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")


if __name__ == "__main__":
    main(sys.argv[1:])
