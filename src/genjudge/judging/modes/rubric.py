"""rubric: each answer graded against its item's own rubric, one judge request per criterion, as
HealthBench grades (judging/rubric_scores.py has the scores).

A request shows the conversation with the answer as its last assistant turn first and the criterion
last (`{conversation}` before `{rubric_item}` in the template), so that an engine with a prefix cache
reuses an item's conversation across its criteria. The judge replies with a JSON object holding
`criteria_met` (true or false) and an explanation; the verdict is read from the reply's own LAST JSON
object that holds `criteria_met` as a boolean, never from any other text (a template's example object
that a judge repeats comes before its own). A reply with none is unparsed with its cause: the judge
stage asks again up to `judge.rubric.max_parse_attempts` times where a second try can differ (a
sampling judge, or one behind an endpoint), and the answer's score then follows
`judge.rubric.unparsed` (leave_out, the default, or not_met). Nothing is guessed.

Requests are numbered by criterion (`order` k is criterion k of the item's rubric), so the item store
keeps each criterion's reply under its own key: a killed job resumes criterion by criterion.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd

from genjudge.data.conversation import placeholders, reference_turns
from genjudge.data.rubrics import list_of, rubric_of
from genjudge.errors import InputError
from genjudge.judging.items import item_codes
from genjudge.judging.modes.base import (
    NO_REFERENCE,
    UNJUDGED,
    JudgeMode,
    JudgeRequest,
    checklist_text,
    lacks_reference,
    orders_of,
    register,
    row_history,
)
from genjudge.judging.reasoning import NOT_FINISHED, unfinished
from genjudge.judging.rubric_scores import answer_score, rubric_tag_scores, score_measure
from genjudge.judging.templates import render_request
from genjudge.judging.verdicts import Verdict

NO_RUBRIC = "no rubric"
# An answer left out of the scores (judge.rubric.unparsed: leave_out): the cause; which criteria is its detail.
CRITERIA_UNREAD = "a criterion's reply gave no verdict: the answer is left out (judge.rubric.unparsed: leave_out)"
UNPARSED_CRITERION = "a criterion's reply holds no JSON object with criteria_met true or false"
# Only this many `{` from the end of a reply are tried as the start of its last JSON object: a reply's
# object is near its end, and a degenerate reply of many braces would otherwise be read again and again.
LAST_OBJECTS = 64


def read_reply(text) -> Verdict:
    """A criterion's verdict ("met" / "not met") from the last JSON object in the reply that holds
    `criteria_met` as a boolean; its explanation as the detail."""
    if not isinstance(text, str) or not text.strip():
        return Verdict(None, "empty judge output", 0)
    decoder = json.JSONDecoder()
    starts = [m.start() for m in re.finditer(r"\{", text)][-LAST_OBJECTS:]
    seen = 0
    for at in reversed(starts):
        try:
            obj, _ = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and "criteria_met" in obj:
            seen += 1
            met = obj["criteria_met"]
            if isinstance(met, bool):
                why = obj.get("explanation")
                return Verdict("met" if met else "not met", None, seen, why if isinstance(why, str) else None)
    if seen:
        return Verdict(None, "criteria_met is not true or false", seen)
    tail = " ".join(text.split())[-60:]
    return Verdict(None, UNPARSED_CRITERION, 0, f"the text ends: ...{tail}")


def conversation_text(row, answer: str) -> str:
    """The conversation as the grader sees it: `role: content` turns, the answer as the last assistant
    turn (HealthBench's form)."""
    messages = json.loads(row.messages) if isinstance(getattr(row, "messages", None), str) else None
    if messages is None:
        history = row_history(row)
        messages = []
        for turn in history[:-1]:
            messages += [
                {"role": "user", "content": turn["question"]},
                {"role": "assistant", "content": turn["answer"]},
            ]
        messages.append({"role": "user", "content": row.prompt})
    turns = [*messages, {"role": "assistant", "content": answer if isinstance(answer, str) else ""}]
    return "\n\n".join(f"{m['role']}: {m['content']}" for m in turns)


def rubric_item(c: dict) -> str:
    """A criterion as HealthBench's grader shows it: `[points] criterion`."""
    points = c["points"]
    return f"[{int(points) if float(points).is_integer() else points}] {c['criterion']}"


class Rubric(JudgeMode):
    name = "rubric"
    placeholders = frozenset(
        {
            "conversation",
            "rubric_item",
            "criterion",
            "points",
            "question",
            "reference",
            "candidate",
            "answer",
            "checklist",
        }
    )
    graded = (("conversation", "candidate", "answer"),)
    marker = "criteria_met"
    settings = frozenset({"rubric"})
    item_fields = ("rubric",)
    per_item_criteria = True
    paired_measure = "rubric_score"
    paired_binary = False
    headline_rule = (
        "the mean of the answers' rubric scores over the answers with every criterion read, clipped to [0, 1]"
    )

    def check(self, spec) -> None:
        if spec.cascade:
            raise InputError(
                "judge.cascade: mode 'rubric' has nothing for a rule to decide: each criterion is a judgment "
                "of the answer, with no reference to match exactly; set judge.cascade: false"
            )
        super().check(spec)

    def requests_note(self) -> str:
        return ", one a criterion of the item's rubric"

    def requests_of(self, row) -> int:
        return max(1, len(rubric_of(getattr(row, "rubric", None)) or []))

    def requests(self, gens, spec, template, opponent=None, answer=None) -> list[JudgeRequest]:
        out = []
        ref_turns = reference_turns(template)
        for row in gens.itertuples():
            turn, sample = int(getattr(row, "turn", 1)), int(getattr(row, "sample", 0))
            criteria = rubric_of(getattr(row, "rubric", None))
            history = row_history(row)
            if not criteria:
                out.append(JudgeRequest(row.id, 0, NO_RUBRIC, None, turn, sample))
                continue
            if unfinished(row):  # no answer to grade: the trace never closed
                out += [JudgeRequest(row.id, k, NOT_FINISHED, None, turn, sample) for k in range(len(criteria))]
                continue
            if lacks_reference(history, False, ref_turns):
                out += [JudgeRequest(row.id, k, NO_REFERENCE, None, turn, sample) for k in range(len(criteria))]
                continue
            convo = conversation_text(row, row.output)
            where = f"item {row.id!r}" + (f", turn {turn}" if turn > 1 or len(history) > 1 else "")
            checklist = checklist_text(row)
            for k, c in enumerate(criteria):
                text = render_request(
                    template,
                    f"{where}, criterion {k}",
                    conversation=convo,
                    rubric_item=rubric_item(c),
                    criterion=c["criterion"],
                    points=c["points"],
                    question=row.prompt,
                    reference=row.reference,
                    candidate=row.output,
                    answer=row.output,
                    checklist=checklist,
                    turn=turn,
                    **placeholders(history),
                )
                out.append(JudgeRequest(row.id, k, "judge", text, turn, sample))
        return out

    def parse_text(self, text, rx, custom, options=None) -> Verdict:
        return read_reply(text)

    def reply_parses(self, text) -> bool:
        """Whether one judge reply gives its criterion's verdict (the judge stage asks again where not)."""
        return read_reply(text).verdict is not None

    def retry_attempts(self, spec) -> int:
        return int((getattr(spec, "rubric", None) or {}).get("max_parse_attempts", 1))

    def parse(self, df, raw, pattern, options=None):
        """One row per answer: `criteria` (JSON: each criterion with met true, false or null and the judge's
        explanation), its score (`verdict`, `score`), and why it has none."""
        unparsed_rule = ((options or {}).get("rubric") or {}).get("unparsed", "leave_out")
        groups = orders_of(raw, df)
        scores, reasons, details, criteria_out, n_met, n_unread, decided = [], [], [], [], [], [], []
        for row, got in zip(df.itertuples(), groups):
            criteria = rubric_of(getattr(row, "rubric", None)) or []
            kinds = {r.decided_by for r in got}
            if not criteria or kinds & set(UNJUDGED) or NO_RUBRIC in kinds:
                d = next(iter(kinds - {"judge"}), NO_RUBRIC)
                decided.append(d)
                scores.append(None)
                reasons.append(UNJUDGED.get(d, NO_RUBRIC))
                details.append(None)
                criteria_out.append(json.dumps([]))
                n_met.append(0)
                n_unread.append(0)
                continue
            by_order = {int(r.order): r for r in got}
            marks, graded = [], []
            for k, c in enumerate(criteria):
                r = by_order.get(k)
                v = read_reply(None if r is None else r.judge_output)
                met = None if v.verdict is None else v.verdict == "met"
                marks.append(met)
                graded.append(
                    {
                        **c,
                        "criteria_met": met,
                        "explanation": v.detail if met is not None else None,
                        "unparsed": v.reason,
                    }
                )
            score = answer_score(criteria, marks, unparsed_rule)
            unread = sum(m is None for m in marks)
            decided.append("judge")
            scores.append(score)
            first = next((g for g in graded if g["unparsed"]), None)
            reasons.append(None if score is not None else CRITERIA_UNREAD)
            details.append(
                None
                if first is None
                else f"{unread} of {len(criteria)} unread; criterion {graded.index(first)}: {first['unparsed']}"
            )
            criteria_out.append(json.dumps(graded, ensure_ascii=False))
            n_met.append(sum(bool(m) for m in marks))
            n_unread.append(unread)
        df["decided_by"] = decided
        df["verdict"] = [None if s is None else repr(float(s)) for s in scores]
        df["score"] = pd.to_numeric(pd.Series(scores, index=df.index, dtype=object), errors="coerce")
        df["unparsed_reason"] = reasons
        df["unparsed_detail"] = details
        df["criteria"] = criteria_out
        df["n_criteria_met"] = n_met
        df["n_criteria_unparsed"] = n_unread
        df["judge_output"] = [json.dumps([r.judge_output for r in got]) for got in groups]
        df["p_correct"] = None
        df["n_verdict_markers"] = [0] * len(df)
        return df

    # --- measures ---
    def metrics(self, g: pd.DataFrame) -> dict:
        has = g["score"].notna().to_numpy() if "score" in g else np.zeros(len(g), bool)
        codes, n = item_codes(g, has)
        scores = g["score"].to_numpy(float)[has] if has.any() else np.zeros(0)
        sums = np.bincount(codes, weights=scores, minlength=n) if n else np.zeros(0)
        counts = np.bincount(codes, minlength=n).astype(float) if n else np.zeros(0)
        out = {"rubric_score": score_measure(sums, counts)}
        out["tags"] = tag_measures(g[has] if len(g) else g)
        criteria = [c for text in g.get("criteria", []) for c in json.loads(text or "[]")]
        out["criteria"] = {
            "graded": sum(c["criteria_met"] is not None for c in criteria),
            "met": sum(bool(c["criteria_met"]) for c in criteria),
            "unparsed": sum(c["criteria_met"] is None for c in criteria),
        }
        return out

    def bounds(self, options):
        return {"rubric_score": (0.0, 1.0)}

    def headline(self, s: dict) -> list[tuple[str, str]]:
        m = s["rubric_score"]
        value = "n/a" if m["value"] is None else f"{m['value']:.3f}"
        ci = f" [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]" if m.get("ci95") else ""
        rows = [("rubric score (HealthBench's, clipped to 0-1)", f"{value}{ci}")]
        c = s.get("criteria") or {}
        if c:
            rows.append(("criteria met", f"{c['met']} of {c['graded']} read ({c['unparsed']} unparsed)"))
        return rows

    def leaderboard(self, s: dict) -> dict:
        return {"rubric_score": s["rubric_score"]}

    def leaderboard_measure(self):
        return "rubric_score", "mean"

    def per_item(self, df: pd.DataFrame) -> pd.DataFrame:
        scores = pd.to_numeric(df["score"], errors="coerce")
        g = df.assign(num=scores)[scores.notna()].groupby("id", sort=False)
        return pd.DataFrame({"num": g["num"].sum(), "den": g["num"].count().astype(float)})

    def category_column(self):
        def cell(c):
            m = c["rubric_score"]
            return "n/a" if m["value"] is None else f"{m['value']:.3f}"

        return "rubric score", cell

    def headline_range(self, options):
        return (0.0, 1.0)

    # --- the report ---
    def interval_note(self) -> str:
        return (
            " The rubric score's interval is a percentile bootstrap over items (1,000 resamples) of the mean clipped "
            "to [0, 1], as HealthBench reports it; summary.json gives its bootstrap standard deviation too."
        )

    def example_groups(self, df):
        score = pd.to_numeric(df.get("score"), errors="coerce")
        bands = [
            ("score 0.75 or more", score >= 0.75),
            ("score from 0.25 to 0.75", (score >= 0.25) & (score < 0.75)),
            ("score below 0.25", score < 0.25),
            ("unparsed (a criterion unread)", score.isna()),
        ]
        return [(name, df[mask.fillna(False).to_numpy(bool)]) for name, mask in bands]

    def judge_said(self, row) -> str:
        criteria = json.loads(getattr(row, "criteria", None) or "[]")
        marks = {True: "met", False: "not met", None: "unread"}
        return "; ".join(f"{marks[c['criteria_met']]}: [{c['points']:g}] {c['criterion']}" for c in criteria)

    def markdown_sections(self, metrics: dict, df) -> list[str]:
        return tags_markdown(metrics.get("tags") or {})


def tags_markdown(tags: dict) -> list[str]:
    """report.md's table of the scores by tag."""
    if not tags:
        return []
    out = [
        "## Rubric scores by tag",
        "",
        "An item's own tags take its answers' scores; a rubric tag scores the criteria that carry it, where one has "
        "positive points. Each: the mean clipped to 0-1, its 95% percentile bootstrap interval over items, n answers.",
        "",
        "| tag | score | n |",
        "|---|---|---|",
    ]
    for tag, m in tags.items():
        ci = f" [{m['ci95'][0]:.3f}, {m['ci95'][1]:.3f}]" if m.get("ci95") else ""
        value = "n/a" if m["value"] is None else f"{m['value']:.3f}"
        out.append(f"| {tag} | {value}{ci} | {m['n_answers']} |")
    return [*out, ""]


def tag_measures(g: pd.DataFrame) -> dict:
    """{tag: score measure} over the answers of `g` with a score: the item's own tags take its answer's
    score; a rubric tag its criteria's, where it holds a positive one."""
    per_tag: dict = {}
    for row in g.itertuples():
        if pd.isna(getattr(row, "score", None)):
            continue
        for tag in list_of(getattr(row, "tags", None)):
            per_tag.setdefault(tag, []).append((row.id, float(row.score)))
        criteria = json.loads(getattr(row, "criteria", "[]") or "[]")
        marks = [c["criteria_met"] for c in criteria]
        for tag, s in rubric_tag_scores(criteria, marks, "not_met").items():
            per_tag.setdefault(tag, []).append((row.id, s))
    out = {}
    for tag, pairs in sorted(per_tag.items()):
        ids = pd.Index([i for i, _ in pairs])
        codes, uniques = pd.factorize(ids)
        values = np.array([v for _, v in pairs])
        sums = np.bincount(codes, weights=values, minlength=len(uniques))
        counts = np.bincount(codes, minlength=len(uniques)).astype(float)
        out[tag] = score_measure(sums, counts)
    return out


register(Rubric())
