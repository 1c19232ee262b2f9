"""Judge templates chosen per item, by category and turn.

FastChat grades MT-bench with a reference-guided prompt for its math, reasoning and coding
categories and a general one otherwise, and with a multi-turn prompt for turn 2:

    judge:
      template: single-v1.txt                      # everything no rule matches
      templates:
        - {categories: [math, reasoning, coding], turns: [1], template: single-math-v1.txt}
        - {categories: [math, reasoning, coding], turns: [2], template: single-math-v1-multi-turn.txt}
        - {turns: [2], template: single-v1-multi-turn.txt}

The first rule whose categories (any, when left out) and turns (any, when left out) match an
item applies; `judge.template` (or the mode's own) applies to the rest. Every template is read
and checked while planning.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from genjudge.data.dataset import is_missing
from genjudge.judging.templates import load_template


@dataclass(frozen=True)
class Rule:
    template: str
    categories: tuple | None = None
    turns: tuple | None = None
    # The system message sent with this rule's prompts (FastChat's multi-turn judge prompts have their
    # own); None: the judge's system_prompt.
    system_prompt: str | None = None

    def matches(self, category, turn: int) -> bool:
        if self.categories is not None and category not in self.categories:
            return False
        return self.turns is None or int(turn) in self.turns


def rules_of(entries: list | None) -> list[Rule]:
    return [
        Rule(
            e["template"],
            tuple(e["categories"]) if e.get("categories") else None,
            tuple(int(t) for t in e["turns"]) if e.get("turns") else None,
            e.get("system_prompt"),
        )
        for e in entries or []
    ]


def template_paths(default: str, entries: list | None) -> list[str]:
    """Every template a judge may use: the default first, then the rules', each once."""
    return list(dict.fromkeys([default, *(r.template for r in rules_of(entries))]))


class Templates:
    """The texts of a judge's templates (checked against the mode) and the choice per item."""

    def __init__(self, default: str, entries: list | None, mode, keys: dict | None = None):
        """`keys`: the config key naming each template, for errors (by default judge.template)."""
        self.default = str(default)
        self.rules = rules_of(entries)
        keys = keys or {}
        self.texts = {
            p: load_template(p, mode, keys.get(p, "judge.template")) for p in template_paths(self.default, entries)
        }

    def path_for(self, category, turn) -> str:
        return self.choice(category, turn)[0]

    def choice(self, category, turn) -> tuple[str, str | None]:
        """(template path, the rule's own system prompt or None) of an item's category and turn."""
        category = None if is_missing(category) else category  # NaN: no category
        rule = next((r for r in self.rules if r.matches(category, turn)), None)
        return (rule.template, rule.system_prompt) if rule else (self.default, None)

    def digest(self) -> str:
        """The template's hash, or one over every template text in order (the judge meta's template_hash)."""
        return texts_digest(list(self.texts.values()))


def texts_digest(texts: list[str]) -> str:
    """A judge's template_hash: its one template's hash, or one over every template text in order."""
    if len(texts) == 1:
        return hashlib.sha256(texts[0].encode()).hexdigest()[:16]
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]
