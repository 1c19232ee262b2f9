"""`snakemake --lint`, passing when its only advice is the per-rule conda/container one.

Snakemake exits 1 whenever it advises anything, and this workflow runs in one environment
made by `make setup` rather than per-rule conda environments or containers.
"""

import re
import subprocess
import sys
from pathlib import Path

ALLOWED = {"Specify a conda environment or container for each rule"}


def lint_advice(workflow: Path, env=None) -> tuple[set[str], str]:
    """The kinds of advice `snakemake --lint` (this interpreter's) gives for `workflow`, and its output."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint"], cwd=workflow, env=env, capture_output=True, text=True
    )
    output = proc.stdout + proc.stderr
    return {a.rstrip(".:") for a in re.findall(r"^\s+\* (.+?):?$", output, re.M)}, output


def main() -> int:
    advice, output = lint_advice(Path(__file__).resolve().parents[1])
    if not advice and "Lints for" not in output and "Congratulations" not in output:
        print(output, file=sys.stderr)
        print("snakemake --lint printed no advice and no all-clear: did it run?", file=sys.stderr)
        return 1
    if advice - ALLOWED:
        print(output, file=sys.stderr)
        print(f"snakemake --lint: advice beyond {sorted(ALLOWED)}: {sorted(advice - ALLOWED)}", file=sys.stderr)
        return 1
    print(f"snakemake --lint: only the per-rule software-environment advice ({len(advice)} kind)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
