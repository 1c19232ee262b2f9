"""What the report of an experiment with failures adds: the failed cells set apart (the rest is
reported as usual) and listed with their errors."""

from __future__ import annotations


def failed_markdown(failed: list[dict]) -> list[str]:
    if not failed:
        return []
    out = [
        "## Failed cells",
        "",
        "Not judged, and left out of every measure above; the rest of the run is complete. Fix the cause and "
        "run the same command again: only the failed jobs and what reads them run again.",
        "",
        "| cell | judge | failed job | error | log |",
        "|---|---|---|---|---|",
    ]
    for f in failed:
        cell = f"{f['generator']}/{f['dataset']}" + (f" vs {f['opponent']}" if f["opponent"] else "")
        for e in f["errors"]:
            job = (
                f"generate {e['generator']}/{e['dataset']}/{e['shard']}"
                if f["stage"] == "generate"
                else f"judge {e.get('judge', f['judge'])}"
            )
            message = " ".join(e["message"].split()).replace("|", "\\|")
            message = message if len(message) <= 240 else message[:239] + "…"
            out.append(f"| {cell} | {f['judge']} | {job} | {e['type']}: {message} | {e['log']} |")
    return [*out, ""]


def with_sections(text: str, failed: list[dict]) -> str:
    """report.md with the failed cells before its first section."""
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
    return "\n".join([*lines[:at], *failed_markdown(failed), *lines[at:]])


class Study:
    """The report stage's view of an experiment with failures: `of` sets the failed cells apart
    (genjudge.failures.surviving); `add_to` puts the failures in the summary."""

    def __init__(self, full, survived):
        self.full = full
        self.exp, self.config = survived.exp, survived.config
        self.gen_metas, self.judge_metas, self.failed = survived.gen_metas, survived.judge_metas, survived.failed

    @classmethod
    def of(cls, exp, config: dict, gen_metas, judge_metas: dict) -> Study:
        from genjudge.failures import surviving

        return cls(exp, surviving(exp, config, gen_metas, judge_metas))

    def add_to(self, run) -> None:
        run.failed_cells = self.failed

    def markdown(self, text: str) -> str:
        return with_sections(text, self.failed)
