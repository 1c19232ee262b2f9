"""Every Eval Ever's instance-level records of one cell (`instance_level_eval.schema.json`): one per judged
answer (an item's turn and sample), the answer skipped or failed among them with its error.

`evaluation.score` is what the answer counts for in the headline (the grading mode says: a correct
verdict 1, a score as given, a win 1 and a tie 1/2); its mean over the records whose
`metadata.counted` is "true" is the headline. An answer without a verdict (unparsed, skipped, its cell
failed) is not counted: the schema asks a score of every record, so it holds 0 there and `error` says
why. `is_correct` is true only where the mode's verdict says an answer is correct (reference mode);
a grade or a preference is not a claim of correctness. The judge's text, verdict and token counts,
who decided (`decided_by`: the judge or a rule) and the votes of a panel's judges are in `metadata`.
"""

from __future__ import annotations

import hashlib

from genjudge.data.dataset import is_missing
from genjudge.export.eee_files import SCHEMA_VERSION
from genjudge.export.eee_records import strings
from genjudge.export.inputs import CellInput, RunContext
from genjudge.judging.modes.base import JudgeCall


def _value(row, name):
    v = getattr(row, name, None)
    return None if is_missing(v) else v


def _text(row, name) -> str | None:
    v = _value(row, name)
    return None if v is None else str(v)


def _count(row, name) -> int | None:
    v = _value(row, name)
    return None if v is None else int(v)


def _conversations(ci: CellInput) -> dict:
    """(id, sample) -> {turn: row} of the cell's rows: each graded turn sees the turns before it."""
    out: dict = {}
    for row in ci.rows.itertuples():
        out.setdefault((row.id, int(getattr(row, "sample", 0))), {})[int(getattr(row, "turn", 1))] = row
    return out


def messages(turns: dict, upto: int) -> list[dict]:
    """The conversation up to turn `upto`: each turn's question, then its answer (with its trace)."""
    out = []
    for t in sorted(k for k in turns if k <= upto):
        row = turns[t]
        out.append({"turn_idx": len(out), "role": "user", "content": _text(row, "prompt")})
        answer = {"turn_idx": len(out), "role": "assistant", "content": _text(row, "output")}
        if _value(row, "reasoning") is not None:
            answer["reasoning_trace"] = str(row.reasoning)
        out.append(answer)
    return out


def calls(ci: CellInput, row) -> list[tuple[str, JudgeCall]]:
    """(judge, call) behind the row's verdict: the mode's calls for a judge; each member's vote for a panel."""
    if ci.panel_rule:
        return [(j.name, JudgeCall(0, _value(row, f"vote:{j.name}"), f"judge {j.name}")) for j in ci.judges]
    return [(ci.name, c) for c in ci.mode.judge_calls(row)]


def attribution(ci: CellInput, row, turn_idx: int, source: str) -> tuple[list[dict], dict]:
    """(answer_attribution, the judges' texts and tokens for metadata) of one row."""
    verdict, decided = _value(row, "verdict"), _value(row, "decided_by")
    base = {"turn_idx": turn_idx, "source": source}
    if (ci.failed and ci.panel_rule) or (decided is None and not ci.panel_rule):  # no judge saw it
        return [], {}
    if decided != "judge" and not ci.panel_rule:
        if verdict is None:
            return [], {}
        how = "exact_match" if decided == "rule" else "rule"  # the cascade's exact match, or a policy's verdict
        # the cascade compared the answer extracted (the whole text where the dataset extracts none)
        found = (_value(row, "answer_extracted") or _value(row, "output")) if decided == "rule" else None
        value = str(found if found is not None else verdict)
        return [{**base, "extracted_value": value, "extraction_method": how, "is_terminal": True}], {}
    made = calls(ci, row)
    out, meta = [], {"judge_input_tokens": 0, "judge_output_tokens": 0}
    for judge, call in made:
        out.append(
            {
                **base,
                "extracted_value": call.label or "",
                "extraction_method": "llm_judge",
                "is_terminal": len(made) == 1,
            }
        )
        stored = ci.raw.get((judge, row.id, int(getattr(row, "turn", 1)), int(getattr(row, "sample", 0)), call.order))
        suffix = "" if len(made) == 1 else f" ({call.shown})"
        if stored:
            meta[f"judge_output{suffix}"] = stored["text"]
            meta["judge_input_tokens"] += stored["n_in"]
            meta["judge_output_tokens"] += stored["n_out"]
        if call.label is not None and suffix:
            meta[f"judge_verdict{suffix}"] = call.label
    if len(made) > 1:
        method = f"llm_judge_panel_{ci.panel_rule}" if ci.panel_rule else "llm_judge_combined"
        out.append({**base, "extracted_value": verdict or "", "extraction_method": method, "is_terminal": True})
    return out, meta


def error_of(ci: CellInput, row, ctx: RunContext) -> str | None:
    if ci.failed:
        own = _value(row, "unparsed_reason")
        return ctx.scrub(ci.error + (f"; this answer: no verdict: {own}" if own else ""))
    if _value(row, "skipped") is not None:
        return ctx.scrub(f"skipped: {row.skipped}")
    if _value(row, "verdict") is None:
        reason = _value(row, "unparsed_reason") or "no verdict"
        detail = _value(row, "unparsed_detail")
        return ctx.scrub(f"no verdict: {reason}" + (f" ({detail})" if detail else ""))
    return None


def record(ci: CellInput, ctx: RunContext, ids: dict, row, turns: dict) -> dict:
    turn, sample = int(getattr(row, "turn", 1)), int(getattr(row, "sample", 0))
    several = len(turns) > 1
    reference = _value(row, "reference")
    raw_input = _text(row, "prompt") or ""
    refs = [] if reference is None else [str(reference)]
    out = {
        "schema_version": SCHEMA_VERSION,
        **ids,
        "sample_id": str(row.id),
        "sample_hash": hashlib.sha256((raw_input + "".join(refs)).encode()).hexdigest(),
        "interaction_type": "multi_turn" if several else "single_turn",
        "input": {"raw": raw_input, "formatted": _text(row, "prompt_sent"), "reference": refs},
    }
    if several:
        out["output"], out["messages"] = None, messages(turns, turn)
        turn_idx = 2 * sorted(k for k in turns if k <= turn).index(turn) + 1  # the graded answer's message
        source = f"messages[{turn_idx}].content"
    else:
        output, trace = _text(row, "output"), _text(row, "reasoning")
        out["output"] = {
            "raw": [] if output is None else [output],
            "reasoning_trace": None if trace is None else [trace],
        }
        out["messages"], turn_idx, source = None, 0, "output.raw"
    verdict = _value(row, "verdict")  # as read; nothing of a failed cell counts
    counted = verdict is not None and not ci.failed and _value(row, "skipped") is None
    value = ci.mode.answer_value(verdict) if counted else None
    out["answer_attribution"], judged = attribution(ci, row, turn_idx, source)
    out["evaluation"] = {
        "score": 0.0 if value is None else float(value),
        "is_correct": value is not None and bool(ci.mode.answer_correct(verdict)),
        "num_turns": turn,
    }
    n_in, n_out = _count(row, "n_prompt_tokens"), _count(row, "n_generated_tokens")
    if n_in is not None and n_out is not None:
        out["token_usage"] = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
    out["error"] = error_of(ci, row, ctx)
    meta = {
        "judge": ci.name,
        "judges": [j.name for j in ci.judges] if ci.panel_rule else None,
        "decided_by": "panel" if ci.panel_rule and not ci.failed else _value(row, "decided_by"),
        "verdict": verdict,
        "counted": "true" if value is not None else "false",
        "turn": turn,
        "sample": sample,
        "category": _value(row, "category"),
        "opponent": ci.cell.opponent,
        "p_correct": _value(row, "p_correct"),
        "finish_reason": _value(row, "finish_reason"),
        "answer_extraction": _value(row, "answer_extraction"),
        "exact_match": _value(row, "exact_match"),
        **{k: v for k, v in judged.items() if v or not k.endswith("tokens")},
    }
    out["metadata"] = strings(meta)
    return out


def instance_records(ci: CellInput, ctx: RunContext, ids: dict) -> list[dict]:
    """`ids`: evaluation_id, model_id, evaluation_name and evaluation_result_id (the headline's, where the
    cell has one) shared by the cell's records. In the judgments' order: items, turns, samples."""
    convo = _conversations(ci)
    return [record(ci, ctx, ids, row, convo[(row.id, int(getattr(row, "sample", 0)))]) for row in ci.rows.itertuples()]
