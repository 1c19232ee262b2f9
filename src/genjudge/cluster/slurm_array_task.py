"""Which job a task of a SLURM job array runs.

snakemake-executor-plugin-slurm 2.8 starts every task of an array with the command line of the
array's first job plus a payload (`--slurm-jobstep-array-execs`) that maps each task index to
its own command; the task runs its own command, but the Snakemake process around it still
targets the first job and checks that job's outputs (snakemake/snakemake-executor-plugin-slurm#447).
A task that finishes before the first one (the first was requeued, preempted, or is simply
slower) then fails with "missing output files" although its own outputs are there. The workflow
therefore restarts that process, while the Snakefile is read and before anything else happens,
with its own job as the target (`own_command_line`), found in the payload.
"""

from __future__ import annotations

import base64
import json
import shlex
import zlib

OPTION = "--slurm-jobstep-array-execs"


def _payload(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg.startswith(OPTION + "="):
            return arg.split("=", 1)[1]
        if arg == OPTION and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _target_jobs(command: str) -> list[str]:
    words = shlex.split(command)
    if "--target-jobs" not in words:
        return []
    out = []
    for word in words[words.index("--target-jobs") + 1 :]:
        if word.startswith("-"):
            break
        out.append(word)
    return out


def own_target_jobs(argv: list[str], env) -> list[str] | None:
    """The `--target-jobs` of this array task's own command, when this process was started with
    another job's command line (a task other than the first of its array); else None."""
    task = env.get("SLURM_ARRAY_TASK_ID")
    payload = _payload(argv)
    if task is None or payload is None:
        return None
    execs = json.loads(base64.b64decode(payload))
    compressed = execs.get(str(int(task)))
    if compressed is None:  # the first task: its command line is its own
        return None
    own = _target_jobs(zlib.decompress(bytes.fromhex(compressed)).decode("utf-8"))
    given = _target_jobs(" ".join(shlex.quote(a) for a in argv))
    return own if own and own != given else None


def own_command_line(argv: list[str], env) -> list[str] | None:
    """`argv` with `--target-jobs` naming this array task's own job, when it named another; else None."""
    own = own_target_jobs(argv, env)
    if own is None:
        return None
    start = argv.index("--target-jobs") + 1
    end = start
    while end < len(argv) and not argv[end].startswith("-"):
        end += 1
    return [*argv[:start], *own, *argv[end:]]
