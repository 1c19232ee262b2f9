"""Every Eval Ever's published schema, and the reading of an export against it and against the report.

The schema comes from the published wheel (`every-eval-ever` 0.3.0 on PyPI), fetched once into the
run's machine cache; nothing of it is kept in the repository. `reaggregate` reads the headline figures
back from the instance records by the rules docs/export.md states (a record counts where
`metadata.counted` is "true"; the headline is the mean of the counted scores; pass@k from each item's
counted samples), written here without genjudge's code.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

WHEEL = "every-eval-ever==0.3.0"
SCHEMAS = ("schemas/eval.schema.json", "schemas/instance_level_eval.schema.json")


def fetch_schemas(cache: Path) -> tuple[dict, dict]:
    """(aggregate schema, instance schema) read from the wheel, downloaded into `cache` where it is not
    there yet; the test fails, saying why, where PyPI cannot be reached."""
    wheels = sorted(cache.glob("every_eval_ever-0.3.0-*.whl"))
    if not wheels:
        cache.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=cache) as tmp:  # complete wheels only: renamed into place
            cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--python-version", "3.12"]
            cmd += ["--only-binary=:all:", WHEEL, "-d", tmp, "--quiet"]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                pytest.fail(f"fetching {WHEEL} from PyPI for its schema took over 300 s: is PyPI reachable?")
            got = sorted(Path(tmp).glob("every_eval_ever-0.3.0-*.whl"))
            if proc.returncode != 0 or not got:
                pytest.fail(
                    f"could not fetch {WHEEL} from PyPI, whose schema the export is validated against "
                    f"(`{' '.join(cmd)}` exited {proc.returncode}): {(proc.stderr or proc.stdout)[-1500:]}"
                )
            os.replace(got[0], cache / got[0].name)
        wheels = sorted(cache.glob("every_eval_ever-0.3.0-*.whl"))
    with zipfile.ZipFile(wheels[0]) as zf:
        found = {s: [n for n in zf.namelist() if n.endswith(s)] for s in SCHEMAS}
        missing = [s for s, names in found.items() if len(names) != 1]
        if missing:
            pytest.fail(f"{wheels[0].name} holds no single {missing}: not the schema files expected")
        return tuple(json.loads(zf.read(found[s][0])) for s in SCHEMAS)


def validators(cache: Path):
    import jsonschema

    agg, inst = fetch_schemas(cache)
    return jsonschema.Draft7Validator(agg), jsonschema.Draft7Validator(inst)


def exported(root: Path) -> list[tuple[Path, dict, list[dict]]]:
    """(aggregate path, aggregate, its instance records) of each cell under `root` (export/eee)."""
    out = []
    for path in sorted((root / "data").rglob("*.json")):
        record = json.loads(path.read_text())
        samples = root / record["detailed_evaluation_results"]["file_path"]
        out.append((path, record, [json.loads(line) for line in samples.read_text().splitlines()]))
    return out


def problems(root: Path, schema_validators) -> list[str]:
    """Each exported record that the published schema refuses, and each instance file that does not match
    its aggregate (checksum, rows, evaluation id)."""
    va, vi = schema_validators
    out = []
    for path, record, instances in exported(root):
        out += [f"{path.name}: {list(e.absolute_path)} {e.message[:200]}" for e in va.iter_errors(record)]
        detail = record["detailed_evaluation_results"]
        data = (root / detail["file_path"]).read_bytes()
        import hashlib

        if hashlib.sha256(data).hexdigest() != detail["checksum"] or len(instances) != detail["total_rows"]:
            out.append(f"{path.name}: checksum or rows of {detail['file_path']} differ")
        for i, r in enumerate(instances):
            out += [
                f"{detail['file_path']}:{i + 1}: {list(e.absolute_path)} {e.message[:200]}" for e in vi.iter_errors(r)
            ]
            if r["evaluation_id"] != record["evaluation_id"]:
                out.append(f"{detail['file_path']}:{i + 1}: evaluation_id differs from its aggregate's")
    return out


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def reaggregate(instances: list[dict]) -> dict:
    """{result id: value} read back from the instance records: the headline (the mean of the counted
    scores), the headline per turn, and pass@k over the items' counted samples."""
    counted = [r for r in instances if r["metadata"]["counted"] == "true"]
    if not counted:
        return {}
    head = counted[0]["evaluation_result_id"]
    out = {head: _mean([r["evaluation"]["score"] for r in counted])}
    turns = sorted({int(r["metadata"]["turn"]) for r in instances})
    if len(turns) > 1:
        for t in turns:
            values = [r["evaluation"]["score"] for r in counted if int(r["metadata"]["turn"]) == t]
            if values:
                out[f"{head}/turn_{t}"] = _mean(values)
    items: dict = {}  # (sample id, turn) -> its counted samples' correctness, items in first-seen order
    for r in instances:
        items.setdefault((r["sample_id"], r["metadata"]["turn"]), [])
    for r in counted:
        items[(r["sample_id"], r["metadata"]["turn"])].append(r["evaluation"]["is_correct"])
    n_samples = len({r["metadata"]["sample"] for r in instances})
    if n_samples > 1:  # is_correct: what pass@k counts (reference mode's verdicts)
        k = 1
        while True:
            values = [1 - math.comb(len(x) - sum(x), k) / math.comb(len(x), k) for x in items.values() if len(x) >= k]
            if values:
                out[f"samples/pass_at_k/k_{k}"] = sum(values) / float(len(values))
            if k >= n_samples:
                break
            k = min(2 * k, n_samples)
    return out


def scores(record: dict) -> dict:
    """{result id: score} of an aggregate."""
    return {r["evaluation_result_id"]: r["score_details"]["score"] for r in record["evaluation_results"]}


def interval(record: dict, rid: str) -> list | None:
    r = next(r for r in record["evaluation_results"] if r["evaluation_result_id"] == rid)
    ci = r["score_details"]["uncertainty"].get("confidence_interval")
    return [ci["lower"], ci["upper"]] if ci else None
