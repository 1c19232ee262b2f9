"""What planning (genjudge plan, and a dry run) says of the dates chat templates stamp into prompts."""

from __future__ import annotations

from pathlib import Path

from genjudge.models.chat_templates import stamps_date
from genjudge.store import chat_date


def chat_date_notes(exp, run: str, configured: str | None) -> list[str]:
    """A note naming the local models whose chat template stamps today's date, with the date this run
    renders them with (`configured`: the config's chat_date; else the one pinned in results/<run>); one
    naming the endpoint models, whose server renders (and dates) their prompts."""
    stamping, served = [], []
    for kind, entries in (("generator", exp.generators), ("judge", exp.judges)):
        for name, section in entries.items():
            if section["model"] is None:  # a plan of one role: the other names no model
                continue
            model = f"{kind} {name} ({section['model']})"
            if section["engine"] == "openai":
                served.append(model)
            elif section["use_chat_template"] is not False and stamps_date(section["model"], section["revision"]):
                stamping.append(model)
    lines = []
    if stamping:
        results = Path("results") / str(run)
        pinned = chat_date.peek(results, configured)
        when = (
            f"{pinned.date} ({pinned.source})"
            if pinned
            else f"the date of the run's first job (today: {chat_date.today()}), pinned then in "
            f"{results / chat_date.PIN_FILE} for every later job and rerun"
        )
        lines.append(
            f"note: the chat template of {', '.join(stamping)} stamps today's date (strftime_now) into every "
            f"prompt, and so into every item key: this run renders it with {when}; chat_date sets another"
        )
    if served:
        lines.append(
            f"note: {', '.join(served)}: the server renders the chat template; where it stamps today's date, "
            "the date is the server's and cannot be pinned here (chat_date does not reach it)"
        )
    return lines
