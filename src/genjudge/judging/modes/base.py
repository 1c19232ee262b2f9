"""What every grading mode is: its template's placeholders, its verdict pattern and
labels, how it turns answers into judge requests, how it reads verdicts back, and
which measures it reports.

A mode is one object; callers look it up by name (`genjudge.judging.modes.get`) and
never branch on the name. Reading verdicts binds to the LAST match of the pattern in
the judge's text; no match is an explicit unparsed result with a reason.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pandas as pd

from genjudge.data.conversation import TURN_PLACEHOLDER, placeholders, reference_turns
from genjudge.data.dataset import is_missing
from genjudge.data.samples import ROW_KEY, with_sample
from genjudge.errors import InputError
from genjudge.judging.answer_rules import methods_for
from genjudge.judging.extraction import check_answer
from genjudge.judging.items import item_mean, item_rate
from genjudge.judging.reasoning import JUDGE_REASONING_UNFINISHED, NOT_FINISHED, REASONING_UNFINISHED, unfinished
from genjudge.judging.templates import render_request
from genjudge.judging.verdicts import Verdict, compile_pattern, parse_verdict


@dataclass(frozen=True)
class JudgeRequest:
    """One call of the judge, or an item a rule decided (`text` is None then)."""

    id: str
    order: int  # 0; pairwise: 0 = candidate shown as A, 1 = candidate shown as B
    # "judge", "rule", "no reference" (the template needs one the item lacks) or "reasoning not finished"
    decided_by: str
    text: str | None
    turn: int = 1  # the conversation's turn graded (1 for a single-turn item)
    sample: int = 0  # which of the item's samples (generator.n_samples) the answer is


@dataclass(frozen=True)
class JudgeCall:
    """One judge call behind a judged answer, as an export lists it: the raw row's `order`, what was read
    from its text (None: nothing), and how the call showed the answer, in words ("" for a plain call)."""

    order: int
    label: str | None
    shown: str = ""


def _label(value) -> str | None:
    return None if is_missing(value) else str(value)


def decided_by_rule(check) -> bool:
    """The cascade decides only what is certain: a match of answers both found strictly (the format the
    prompt asked for, one candidate, nothing rejected or taken back); a fallback's match goes to the judge."""
    return bool(check.match) and check.strict


NO_REFERENCE = "no reference"
SKIPPED = "skipped"  # not asked: too long for a model's context (dataset.on_too_long: skip); not counted


def row_history(row) -> list[dict]:
    """Turns 1..k of a judged row's conversation ({question, answer, reference}); a frame
    without the `history` column (`conversation.with_history`) is single-turn."""
    history = getattr(row, "history", None)
    if isinstance(history, list):
        return history
    return [{"question": row.prompt, "answer": row.output, "reference": row.reference}]


def checklist_text(row) -> str:
    """An item's checklist as a template's {checklist} shows it, numbered ("(none)" where it has none)."""
    from genjudge.data.rubrics import list_of, numbered

    items = list_of(getattr(row, "checklist", None))
    return numbered(items) if items else "(none)"


def lacks_reference(history: list[dict], needs_reference: bool, ref_turns: set) -> bool:
    """A request the judge cannot grade as asked: the mode grades against the turn's reference
    and it has none, or the template shows a turn's reference ({ref_answer_j}) that is missing."""
    if needs_reference and is_missing(history[-1]["reference"]):
        return True
    return any(j <= len(history) and is_missing(history[j - 1]["reference"]) for j in ref_turns)


def pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def rate_text(r: dict) -> str:
    """`75.0% [62.1, 84.6]`."""
    ci = "" if not r.get("ci95") else f" [{100 * r['ci95'][0]:.1f}, {100 * r['ci95'][1]:.1f}]"
    return f"{pct(r['value'])}{ci}"


class JudgeMode:
    """A single-answer grading mode. Subclasses set the class attributes and the metrics."""

    name: str = ""
    placeholders: frozenset[str] = frozenset({"question", "reference", "candidate"})
    # What the judge grades: a template must show one placeholder of each group (or, for turn t
    # of a conversation, its `_t` form: {answer_2}); groups of placeholders the mode lacks are skipped.
    graded: tuple[tuple[str, ...], ...] = (("candidate", "answer"),)
    pattern: str = ""  # default verdict pattern: group 1 is the label
    labels: dict[str, str] = {}  # label as written -> verdict; empty: the captured text is the verdict
    marker: str | None = None  # word that names the verdict line, for unparsed reasons
    logprob_labels: tuple[str, ...] | None = None  # labels scored after `marker:` by `verdict: logprob`
    rule_verdict: str | None = None  # `cascade: true`: the verdict of an exact match, decided without the judge
    unfinished_verdict: str | None = None  # report.unfinished_reasoning: incorrect: an unfinished trace's verdict
    needs_baseline = False
    needs_reference = False  # grades against the reference: an item without one is "no reference"
    scored_in_range = False  # verdicts are numbers within the judge's `score_range`
    requests_per_item = 1  # judge calls per answer (pairwise: both orders); requests_of says it per row
    settings: frozenset = frozenset()  # the judge's settings sections this mode reads (rubric: {"rubric"})
    item_fields: tuple = ()  # item columns every graded item must have (rubric: its rubric), checked at planning
    per_item_criteria = False  # judgments carry each answer's criteria (`criteria`): the report lists them
    paired_measure: str | None = None  # the headline two generators are compared by (judging/paired.py)
    paired_binary = True  # the paired measure is a share of answers (McNemar), not a mean score

    def requests_note(self) -> str:
        """What the plan says of the requests an answer takes beyond one."""
        return f", x{self.requests_per_item} orders" if self.requests_per_item > 1 else ""

    def requests_of(self, row) -> int:
        """The judge calls one answer's row takes (a mode whose items differ, as rubric criteria, says so)."""
        return self.requests_per_item

    # --- configuration ---
    def default_template(self) -> str:
        """Path of the mode's template, relative to the workflow directory."""
        return f"config/templates/{self.name}.txt"

    def check(self, spec) -> None:
        """Refuse judge settings this mode cannot honour (raises InputError)."""
        if spec.verdict == "logprob" and not self.logprob_labels:
            raise InputError(
                f"judge.verdict: logprob is not available in mode {self.name!r} "
                f"(modes with logprob verdicts: {', '.join(logprob_modes())})"
            )
        if spec.cascade and self.rule_verdict is None:
            raise InputError(f"judge.cascade: mode {self.name!r} has no rule to decide exact matches by")

    def missing_graded(self, names: set[str], turn: int | None = None) -> list[tuple[str, ...]]:
        """The groups of `graded` a template with placeholders `names` shows none of, each with the
        names that would do; for `turn` t their `_t` forms count too (any turn's when None)."""
        missing = []
        for group in self.graded:
            if group[0] not in self.placeholders:
                continue
            forms = [n for n in group if TURN_PLACEHOLDER.match(f"{n}_1")]
            shown = names & set(group) or (
                {n for n in names if (m := TURN_PLACEHOLDER.match(n)) and m.group(1) in forms}
                if turn is None
                else names & {f"{n}_{turn}" for n in forms}
            )
            if not shown:
                missing.append((*group, *(f"{n}_{turn or 1}" for n in forms)))
        return missing

    # --- judging ---
    def requests(
        self, gens: pd.DataFrame, spec, template: str, opponent: dict | None = None, answer: dict | None = None
    ) -> list[JudgeRequest]:
        """The judge calls for one generator's answers (`gens`); `opponent` (pairwise) maps (id, turn) to the
        other side's answers; `answer` is the dataset's extraction before exact match (the cascade), each
        row's methods chosen by its category (`answer_rules`)."""
        out = []
        ref_turns = reference_turns(template)
        for row in gens.itertuples():
            turn, sample = int(getattr(row, "turn", 1)), int(getattr(row, "sample", 0))
            history = row_history(row)
            if unfinished(row):  # no answer to grade: the trace never closed
                out.append(JudgeRequest(row.id, 0, NOT_FINISHED, None, turn, sample))
            elif withheld(row):  # the provider withheld it (endpoint.on_filtered: count_wrong): wrong, unjudged
                out.append(JudgeRequest(row.id, 0, WITHHELD, None, turn, sample))
            elif spec.cascade and decided_by_rule(
                check_answer(row.output, row.reference, methods_for(answer, getattr(row, "category", None)))
            ):
                out.append(JudgeRequest(row.id, 0, "rule", None, turn, sample))
            elif lacks_reference(history, self.needs_reference, ref_turns):
                out.append(JudgeRequest(row.id, 0, NO_REFERENCE, None, turn, sample))
            else:
                text = render_request(
                    template,
                    f"item {row.id!r}" + (f", turn {turn}" if turn > 1 or len(history) > 1 else ""),
                    question=row.prompt,
                    reference=row.reference,
                    candidate=row.output,
                    answer=row.output,
                    checklist=checklist_text(row),
                    turn=turn,
                    **placeholders(history),
                )
                out.append(JudgeRequest(row.id, 0, "judge", text, turn, sample))
        return out

    # --- parsing ---
    def compile(self, pattern: str | None) -> re.Pattern:
        return compile_pattern(pattern or self.pattern)

    def parse_text(self, text, rx: re.Pattern, custom: bool, options: dict | None = None) -> Verdict:
        """One judge text's verdict; `options` are the judge's parse settings (e.g. the score range)."""
        # With a custom pattern, the mode's marker word says nothing about why it did not match.
        return parse_verdict(text, rx, self.labels, None if custom else self.marker)

    def parse(
        self, df: pd.DataFrame, raw: pd.DataFrame, pattern: str | None, options: dict | None = None
    ) -> pd.DataFrame:
        """df: the merged generations with exact_match; adds verdict, unparsed_reason and the mode's columns."""
        rx = self.compile(pattern)
        first = orders(raw, df, 0)
        df["decided_by"] = first["decided_by"].to_numpy()
        df["judge_output"] = first["judge_output"].to_numpy()
        df["p_correct"] = first["p_correct"].to_numpy()
        finish = first["judge_finish_reason"].to_numpy() if "judge_finish_reason" in first else [None] * len(df)
        parsed = [
            None
            if d == "rule"
            else self.withheld_verdict(options)
            if d == WITHHELD
            else Verdict(None, UNJUDGED[d], 0)
            if d in UNJUDGED
            else truncated(self.parse_text(t, rx, bool(pattern), options), f, t)
            for d, t, f in zip(df["decided_by"], df["judge_output"], finish)
        ]
        df["verdict"] = [self.rule_verdict if p is None else p.verdict for p in parsed]
        df["unparsed_reason"] = [None if p is None else p.reason for p in parsed]
        df["unparsed_detail"] = [None if p is None else p.detail for p in parsed]
        df["n_verdict_markers"] = [0 if p is None else p.n_markers for p in parsed]
        return df

    def withheld_verdict(self, options: dict | None = None) -> Verdict:
        """The verdict of an answer the provider withheld, counted wrong (endpoint.on_filtered: count_wrong):
        the mode's wrong verdict; a mode without one leaves it unparsed, saying why."""
        if self.unfinished_verdict is None:
            return Verdict(None, f"{WITHHELD} (mode {self.name!r} has no wrong verdict to count it as)", 0)
        return Verdict(self.unfinished_verdict, None, 0)

    # --- measures ---
    def metrics(self, g: pd.DataFrame) -> dict:
        """The mode's measures over one group of judgments (the run, or one category)."""
        raise NotImplementedError

    def bounds(self, options: dict | None) -> dict[str, tuple[float, float]]:
        """Measure -> the range its value cannot leave (a mean score: the score range); none by default."""
        return {}

    def measures(self, g: pd.DataFrame, options: dict | None = None) -> dict:
        """`metrics(g)` with each bounded mean's interval kept within its range: a normal interval
        around a mean near the top of a scale passes the scale's end, where no mean can be. `options`
        None: the range is not known here, and nothing is cut."""
        return self.within_bounds(self.metrics(g), options)

    def within_bounds(self, out: dict, options: dict | None) -> dict:
        """`out` (measures by name) with each bounded measure's interval cut at its range."""
        for name, (lo, hi) in (self.bounds(options) if options is not None else {}).items():
            m = out.get(name)
            if isinstance(m, dict) and m.get("ci95"):
                out[name] = {**m, "ci95": [max(lo, m["ci95"][0]), min(hi, m["ci95"][1])]}
        return out

    def summary(self, df: pd.DataFrame, metrics: dict, options: dict | None = None) -> dict:
        """Run-level fields beside the metrics (e.g. the headline accuracy)."""
        return {}

    def headline(self, s: dict) -> list[tuple[str, str]]:
        """(measure, value) rows for the report and `genjudge summary`."""
        raise NotImplementedError

    def category_column(self) -> tuple[str, callable]:
        """Heading and cell of the per-category table (by default the first leaderboard measure)."""

        def cell(c):
            measures = self.leaderboard(c)
            return rate_text(next(iter(measures.values()))) if measures else ""

        return "result", cell

    def over_samples(self, df: pd.DataFrame) -> dict:
        """Measures over an item's several samples (generator.n_samples), item by item
        (judging/sampling_stats.py); none by default."""
        return {}

    def across_cells(self, df: pd.DataFrame, seed: int = 0) -> dict:
        """Measures over all of a judge's cells at once (pairwise: strengths of every generator)."""
        return {}

    def per_item(self, df: pd.DataFrame) -> pd.DataFrame:
        """One row per item id: `num` over `den` parsed answers make up its part of `paired_measure`
        (answers judged correct, or the sum of scores), for paired differences between generators."""
        raise NotImplementedError

    def leaderboard_measure(self) -> tuple[str | None, str]:
        """(name, kind) of the first measure of `leaderboard`, known before any cell is judged: it heads the
        models x benchmarks column of a judge whose cells all failed. kind: `rate` or `mean`. By default the
        paired measure (a rate where it is a share of answers)."""
        return self.paired_measure, "rate" if self.paired_binary else "mean"

    # --- how the report shows the mode's judgments ---
    def interval_note(self) -> str:
        """What report.md adds to its note on intervals, where the mode's are made otherwise."""
        return ""

    def example_groups(self, df: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
        """The report's examples, by verdict, and the unparsed last."""
        groups = [(str(v), df[df["verdict"] == v]) for v in sorted(df["verdict"].dropna().unique())]
        return [*groups, ("unparsed", df[df["verdict"].isna()])]

    def judge_said(self, row) -> str:
        """What an example's row shows of the judge's reply."""
        return getattr(row, "judge_output", "")

    def markdown_sections(self, metrics: dict, df: pd.DataFrame) -> list[str]:
        """Sections of the mode's own in report.md (after the categories); none by default."""
        return []

    # --- one answer's part in the headline (exports, and reading the headline again from them) ---
    # How the headline measure is made from the answers, in words (the leaderboard's first measure).
    headline_rule = "the mean of the answers' values over the answers with a parsed verdict"

    def answer_value(self, verdict) -> float | None:
        """What one answer's parsed verdict counts for in the headline measure, whose value is the mean of
        these over the answers with a verdict; None without one. By default the verdict as a number."""
        try:
            return None if is_missing(verdict) else float(verdict)
        except (TypeError, ValueError):
            return None

    def answer_correct(self, verdict) -> bool:
        """Whether the verdict calls the answer correct (False where the mode makes no such claim)."""
        return False

    def headline_range(self, options: dict | None) -> tuple[float, float] | None:
        """The range the headline's value lies in: a rate's 0-1 by default, a bounded mean's bounds."""
        name, kind = self.leaderboard_measure()
        return self.bounds(options).get(name) if kind == "mean" else (0.0, 1.0)

    def judge_calls(self, row) -> list[JudgeCall]:
        """The judge calls behind one row of the judgments (an `itertuples` row) and what each read."""
        return [JudgeCall(0, _label(getattr(row, "verdict", None)))]

    def leaderboard(self, s: dict) -> dict:
        """The headline measures of one cell, each {value, ci95, n}, for the leaderboard
        (by default every interval-bearing measure of the mode)."""
        return {
            k: v
            for k, v in s.items()
            if isinstance(v, dict)
            and {"value", "ci95"} <= set(v)
            and k not in ("exact_match", "judge_exact_match_agreement")
        }


def count_unfinished(df: pd.DataFrame, mode: JudgeMode, options: dict | None, policy: str) -> pd.DataFrame:
    """`report.unfinished_reasoning`: with `incorrect`, an answer whose trace never closed (never judged, so
    unparsed) counts as the mode's worst verdict (reference: incorrect; score: the lowest score), as
    lm-evaluation-harness counts a missing end marker wrong; `leave_out` (and a mode without such a
    verdict, pairwise) leaves it unparsed. The rows keep `decided_by` "reasoning not finished"."""
    verdict = mode.unfinished_verdict
    if mode.name == "score":
        lo = ((options or {}).get("score_range") or (1, 10))[0]
        verdict = f"{float(lo):g}"
    if policy != "incorrect" or verdict is None or "decided_by" not in df:
        return df
    hit = (df["decided_by"] == NOT_FINISHED) & df["verdict"].isna()
    if not hit.any():
        return df
    df = df.copy()
    df["verdict"] = df["verdict"].astype(object).where(~hit, verdict)
    df["unparsed_reason"] = df["unparsed_reason"].astype(object).where(~hit, None)
    if "score" in df:
        df["score"] = pd.to_numeric(df["verdict"], errors="coerce")
    return df


# An answer the provider withheld (finish_reason content_filter, or only tool calls) kept under
# endpoint.on_filtered: count_wrong: its decided_by; graded as the mode's wrong verdict, never judged.
WITHHELD = "withheld by the provider"
WITHHELD_REASONS = ("content_filter", "tool_calls")


def withheld(row) -> bool:
    return getattr(row, "finish_reason", None) in WITHHELD_REASONS


# Requests no judge saw, by their decided_by, and the reason their verdict is missing.
UNJUDGED = {NO_REFERENCE: NO_REFERENCE, NOT_FINISHED: REASONING_UNFINISHED, SKIPPED: None}  # SKIPPED: not counted
TRUNCATED = "truncated: the judge reached max_new_tokens before its verdict (raise judge.max_new_tokens)"
JUDGE_THINKING = "judge reasoning"  # the finish reason the parse stage gives a judge's unclosed trace
# The finish reason of an endpoint's logprob verdict whose response listed no verdict label
# (engine.endpoint.requests, which cannot import this wing, holds the same string).
LOGPROB_UNSEEN = "logprob-unseen"
LOGPROB_UNSEEN_REASON = "no verdict label among the endpoint's top_logprobs"


def truncated(v: Verdict, finish_reason, text=None) -> Verdict:
    """An unparsed verdict of a judge cut off at max_new_tokens is a truncation, said as such; one whose
    own reasoning trace never closed (`JUDGE_THINKING`) says that; an endpoint's logprob verdict whose
    response listed no label says that, with what it listed (`text`)."""
    if finish_reason == LOGPROB_UNSEEN:
        return Verdict(None, LOGPROB_UNSEEN_REASON, 0, text)
    if v.verdict is None and finish_reason == JUDGE_THINKING:
        return Verdict(None, JUDGE_REASONING_UNFINISHED, v.n_markers)
    if v.verdict is None and finish_reason == "length" and v.reason != "empty judge output":
        return Verdict(None, TRUNCATED, v.n_markers, v.detail)
    return v


def orders(raw: pd.DataFrame, df: pd.DataFrame, order: int) -> pd.DataFrame:
    """The raw judge rows of one order, aligned with df's (id, turn, sample) rows; every one must be there."""
    df = with_sample(df if "turn" in df else df.assign(turn=1))
    raw = with_sample(raw if "turn" in raw else raw.assign(turn=1))
    keys = ROW_KEY
    rows = raw[raw["order"] == order].set_index(keys)
    rows = rows.reindex(pd.MultiIndex.from_frame(df[keys]))
    if rows["decided_by"].isna().any():
        missing = df[keys][rows["decided_by"].isna().to_numpy()]
        single = (missing["turn"] == 1).all() and (missing["sample"] == 0).all()
        shown = missing["id"].tolist() if single else missing.values.tolist()
        raise ValueError(f"judge outputs missing for {len(missing)} item(s), e.g. {shown[:5]}")
    return rows


def orders_of(raw: pd.DataFrame, df: pd.DataFrame) -> list[list]:
    """The raw judge rows of each of df's (id, turn, sample) rows, every order of it (a mode that asks
    several questions of one answer, one an order), as lists of named tuples in df's order."""
    df = with_sample(df if "turn" in df else df.assign(turn=1))
    raw = with_sample(raw if "turn" in raw else raw.assign(turn=1))
    groups: dict = {}
    for r in raw.itertuples(index=False):
        groups.setdefault((r.id, int(r.turn), int(r.sample)), []).append(r)
    return [groups.get((i, int(t), int(s)), []) for i, t, s in zip(df["id"], df["turn"], df["sample"])]


def counts(series: pd.Series) -> dict:
    return {str(k): int(v) for k, v in series.value_counts().items()}


def share(parsed: pd.DataFrame, value: str) -> dict:
    """The share of parsed verdicts equal to `value`, its interval clustered by item (turns, samples)."""
    return item_rate(parsed, parsed["verdict"] == value)


def mean_of(parsed: pd.DataFrame, column: str) -> dict:
    """The mean of a parsed column (a score), its interval clustered by item (turns, samples)."""
    return item_mean(parsed, parsed[column])


_REGISTRY: dict[str, JudgeMode] = {}


def register(mode: JudgeMode) -> JudgeMode:
    """Make a mode available by its name (built-in modes register on import)."""
    if not mode.name:
        raise ValueError("a judge mode needs a name")
    _REGISTRY[mode.name] = mode
    return mode


def get(name: str) -> JudgeMode:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(
            f"judge.mode: unknown mode {name!r}; known modes: {', '.join(sorted(_REGISTRY))} "
            "(a mode of your own is a module that calls genjudge.judging.modes.register, "
            "listed under `plugins`)"
        ) from None


def names() -> list[str]:
    return sorted(_REGISTRY)


def logprob_modes() -> list[str]:
    return [n for n, m in sorted(_REGISTRY.items()) if m.logprob_labels]
