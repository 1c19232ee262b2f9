"""A stand-in `nvidia-smi` executable put first on PATH: canned CSV, a failure, or a hang."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

# Two boards as `nvidia-smi --query-gpu=index,uuid --format=csv,noheader` prints them.
TWO_GPUS = "0, GPU-8932f937-d72c-4106-c12f-20bd9faed9f6\n1, GPU-4a2b6c33-95c1-4e7b-8f1d-0c5ab7e8d2a1\n"
UUID0 = "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"
UUID1 = "GPU-4a2b6c33-95c1-4e7b-8f1d-0c5ab7e8d2a1"


def install(
    bin_dir: Path, monkeypatch, stdout: str = TWO_GPUS, exit_code: int = 0, stderr: str = "", sleep: float = 0.0
) -> Path:
    """Write `bin_dir/nvidia-smi` and put `bin_dir` first on PATH (for this test only)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "nvidia-smi"
    lines = ["#!/bin/sh", 'echo "$@" >> "$0.calls"']
    if sleep:
        lines.append(f"sleep {sleep}")
    lines.append(f"printf %s {shlex.quote(stdout)}")
    if stderr:
        lines.append(f"printf %s {shlex.quote(stderr)} >&2")
    lines.append(f"exit {exit_code}")
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return script
