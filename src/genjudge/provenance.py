"""What produced a run: resolved config and its hash, package versions, models, git commit."""

from __future__ import annotations

import hashlib
import json
import subprocess
from importlib import metadata

PACKAGES = [
    "snakemake",
    "snakemake-executor-plugin-slurm",
    "torch",
    "transformers",
    "accelerate",
    "bitsandbytes",
    "tokenizers",
    "pandas",
    "pyarrow",
    "genjudge",
]


def package_versions() -> dict:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def git_state(directory) -> dict:
    def git(*args):
        return subprocess.run(
            ["git", "-C", str(directory), *args], capture_output=True, text=True, timeout=30
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        commit, dirty = "", False
    return {"commit": commit or None, "dirty": dirty if commit else None}


def _one(fingerprints: set):
    """The fingerprint all jobs share (merge refuses shards that differ), or all of them, sorted."""
    fps = sorted(f for f in fingerprints if f)
    return fps[0] if len(fps) == 1 else (fps or None)


def provenance(config: dict, exp, gen_metas, judge_metas: dict, workflow_dir) -> dict:
    """`exp` is the resolved experiment; models are listed by their names in it."""
    canonical = json.dumps(config, sort_keys=True, default=str)
    return {
        "config": config,
        "config_sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "packages": package_versions(),
        "models": {
            "generators": {
                name: {
                    "model": g["model"],
                    "revision": g["revision"],
                    "fingerprint": _one({m.model_fingerprint for m in gen_metas if m.generator == name}),
                }
                for name, g in exp.generators.items()
            },
            "judges": {
                name: {
                    "model": j["model"],
                    "revision": j["revision"],
                    "fingerprint": _one({m.model_fingerprint for m in judge_metas[name].jobs()}),
                }
                for name, j in exp.judges.items()
            },
        },
        "git": git_state(workflow_dir),
    }
