"""A commit message's subject: at most 72 characters, and a blank line before any body, so that
`git log --oneline` reads as a changelog (git takes the whole first paragraph as the subject).

    python tools/commit_msg.py FILE    # exit 1 naming what is wrong (pre-commit's commit-msg hook)
"""

from __future__ import annotations

import sys
from pathlib import Path

LIMIT = 72


def problems(message: str) -> list[str]:
    # Lines git drops: its comments, and everything below the scissors line of `commit -v`.
    lines = []
    for line in message.splitlines():
        if line.startswith("# ------------------------ >8 ------------------------"):
            break
        if not line.startswith("#"):
            lines.append(line.rstrip())
    while lines and not lines[0]:
        lines.pop(0)
    if not lines:
        return ["the message is empty"]
    found = []
    if len(lines[0]) > LIMIT:
        found.append(f"the subject has {len(lines[0])} characters, more than {LIMIT}: {lines[0]!r}")
    if len(lines) > 1 and lines[1]:
        found.append("the subject is one line: leave a blank line before the body")
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tools/commit_msg.py COMMIT_MSG_FILE", file=sys.stderr)
        return 2
    found = problems(Path(argv[0]).read_text(encoding="utf-8"))
    for p in found:
        print(f"commit message: {p}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
