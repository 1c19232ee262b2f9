"""The run's report: summary.json for machines, report.md for people (its text: report_markdown),
per_category.csv for tables. A cell's figures beside its measures come from report_summary."""

from __future__ import annotations

import json

import pandas as pd

from genjudge.config.experiment import of_cell
from genjudge.config.jobs import ReportJob
from genjudge.judging import modes, paired
from genjudge.judging.extraction import NO_ANSWER
from genjudge.judging.items import answers_per_item, count_items, per_turn
from genjudge.judging.modes.base import count_unfinished, pct
from genjudge.judging.reasoning import UNCLOSED
from genjudge.report_html.endpoints import endpoint_markdown, endpoint_rows
from genjudge.stages import controlled
from genjudge.stages.report_markdown import render_experiment, render_markdown, time_model_markdown
from genjudge.stages.report_summary import (
    _shard_rows,
    category_frame,
    category_summaries,
    cause_of,
    counted_as,
    exact_match_fits,
    exact_match_rate,
    fallback_counts,
    generator_section,
    judge_section,
    leaderboard_row,
    placement_warnings,
    skipped_list,
    split_skipped,
    truncated_answers,
    truncated_examples,
    unfinished_causes,
    unparsed_causes,
)
from genjudge.stages.report_table import Study
from genjudge.store import atomic
from genjudge.store.provenance import provenance
from genjudge.store.records import GenerateMeta, JudgeMeta, RunSummary


def parse_options(judge: dict) -> dict:
    """The judge's settings that parsing and the measures read (besides the verdict pattern)."""
    return {
        "score_range": judge["score_range"],
        "rubric": judge.get("rubric") or {},
        "score_rescaled": judge.get("score_rescaled"),
    }


def counted_unfinished(df: pd.DataFrame, judge: dict, config: dict) -> pd.DataFrame:
    """The judgments with report.unfinished_reasoning applied (an unfinished trace counted as incorrect)."""
    return count_unfinished(
        df, modes.get(judge["mode"]), parse_options(judge), config["report"]["unfinished_reasoning"]
    )


def summarise(df: pd.DataFrame, gen_metas: list[GenerateMeta], judge_meta: JudgeMeta, config: dict) -> RunSummary:
    mode = modes.get(config["judge"]["mode"])
    df = counted_unfinished(df, config["judge"], config)
    n = len(df)  # answers: items x turns x samples
    n_judged = int(df["verdict"].notna().sum())
    options = parse_options(config["judge"])
    metrics = mode.measures(df, options)
    extra = mode.summary(df, metrics, options)
    if "sample" in df and df["sample"].nunique() > 1:  # generator.n_samples > 1: measures item by item
        extra["samples"] = mode.within_bounds(mode.over_samples(df), options)
    per_cat = category_summaries(df, mode, options)
    warnings = placement_warnings(gen_metas, judge_meta)
    shards = _shard_rows(gen_metas)
    cut = truncated_answers(df)
    unfinished = df["reasoning_state"].eq(UNCLOSED) if "reasoning_state" in df else pd.Series(False, index=df.index)
    em_shown, em_note = exact_match_fits(df, config.get("dataset"))
    unparsed_reasons, unparsed_examples = unparsed_causes(df, int(config["report"]["n_examples"]))
    return RunSummary(
        run=config["run"],
        mode=mode.name,
        n_items=count_items(df),
        n_answers=n,
        answers_per_item=answers_per_item(df),
        n_judged=n_judged,
        n_unparsed=n - n_judged,
        unparsed_rate=(n - n_judged) / n if n else None,
        unparsed_reasons=unparsed_reasons,
        unparsed_examples=unparsed_examples,
        n_truncated=int(cut.sum()),
        truncated_rate=float(cut.mean()) if n else None,
        truncated_examples=truncated_examples(df, cut, int(config["report"]["n_examples"])),
        n_reasoning_unfinished=int(unfinished.sum()),
        reasoning_unfinished_rate=float(unfinished.mean()) if n else None,
        reasoning_unfinished_causes=unfinished_causes(df, unfinished),
        reasoning_unfinished_counted_as=counted_as(df, unfinished),
        n_reasoning_tokens=sum(m.n_reasoning_tokens or 0 for m in gen_metas),
        accuracy=extra.pop("accuracy", None),
        accuracy_ci95=extra.pop("accuracy_ci95", None),
        exact_match=exact_match_rate(df),
        exact_match_shown=em_shown,
        exact_match_note=em_note,
        per_category=per_cat,
        placement_warnings=warnings,
        answers_not_extracted=int(df["answer_reason"].fillna("").str.startswith(NO_ANSWER).sum())
        if "answer_reason" in df
        else 0,
        exact_match_fallbacks=fallback_counts(df),
        shards=shards,
        generator=generator_section(config["generator"], gen_metas),
        judge=judge_section(config["judge"], mode, judge_meta),
        metrics={**metrics, **extra, **({"per_turn": turns} if (turns := per_turn(df, mode, options)) else {})},
    )


# What the report never needs of judgments.parquet: the prompts as sent (most of its bytes), the
# conversations, the cache keys. Everything else is read, so a mode's own columns are there.
SKIPPED_COLUMNS = {"prompt_sent", "judge_prompt", "messages", "key", "judge_key"}


def read_judgments(path) -> pd.DataFrame:
    import pyarrow.parquet as pq

    wanted = [c for c in pq.read_schema(path).names if c not in SKIPPED_COLUMNS]
    return pd.read_parquet(path, columns=wanted)


def summarise_experiment(
    exp,
    config: dict,
    judgments: dict,
    gen_metas: list[GenerateMeta],
    judge_metas: dict,
    skipped: dict | None = None,
) -> tuple[RunSummary, dict]:
    """One summary per cell and the run's: the cell's own when there is one, else totals and a leaderboard.
    `skipped`: judge -> the answers left out as too long (`split_skipped`), counted and listed per cell.
    Returns (run summary, {cell key: (summary, judgments frame)})."""
    cells = {}
    skipped = skipped or {}
    judgments = {j: counted_unfinished(df_j, exp.judges[j], config) for j, df_j in judgments.items()}
    for judge, df_j in judgments.items():
        for cell in exp.cells(judge):
            df = of_cell(df_j, cell).reset_index(drop=True)
            metas = [m for m in gen_metas if (m.generator, m.dataset) == (cell.generator, cell.dataset)]
            cfg = {
                **config,
                "generator": exp.generators[cell.generator],
                "dataset": exp.datasets[cell.dataset],
                "judge": exp.judges[judge],
            }
            s = summarise(df, metas, judge_metas[judge], cfg)
            own = judge_metas[judge].cells.get(cell.key)
            if own:  # this cell's share of the judge's work, not the whole job's
                s.judge.update(
                    resumed_items=own["resumed"], shared_items=own.get("shared", 0), computed_items=own["computed"]
                )
            gone = skipped.get(judge)
            if gone is not None and len(gone):
                s.skipped_items = skipped_list(of_cell(gone, cell))
                s.n_skipped = len(s.skipped_items)
            s.leaderboard = [leaderboard_row(s, cell.generator, cell.dataset, judge, cell.opponent)]
            key = f"{cell.key} | {judge}" if len(exp.judges) > 1 else cell.key
            cells[key] = (s, df)
    across = {j: m for j, df_j in judgments.items() if (m := modes.get(exp.judges[j]["mode"]).across_cells(df_j))}
    n_boot = int(config["report"]["bootstrap"])
    for j, m in controlled.controlled(exp, judgments, n_boot=n_boot).items():  # length- and style-controlled
        across.setdefault(j, {}).update(m)
    if len(cells) == 1:
        only = next(iter(cells.values()))[0]
        only.across_cells = across
        return only, cells
    summaries = [s for s, _ in cells.values()]
    n, judged = sum(s.n_answers for s in summaries), sum(s.n_judged for s in summaries)
    reasons: dict = {}
    examples: dict = {}
    for key, (s, _) in cells.items():
        for k, v in s.unparsed_reasons.items():
            reasons[k] = reasons.get(k, 0) + v
        for k, es in s.unparsed_examples.items():
            room = int(config["report"]["n_examples"]) - len(examples.setdefault(k, []))
            examples[k] += [{"cell": key, **e} for e in es[: max(room, 0)]]
    mode_names = sorted({s.mode for s in summaries})
    n_cut = sum(s.n_truncated for s in summaries)
    run = RunSummary(
        run=config["run"],
        mode=mode_names[0] if len(mode_names) == 1 else "mixed",
        # items: the datasets' questions the run judged, each once however many generators and judges met it
        n_items=len({(str(d), str(i)) for _, df in cells.values() for d, i in zip(df["dataset"], df["id"])}),
        n_cells=len(cells),
        n_answers=n,  # verdicts: every cell's answers judged (items x turns x samples), summed over the cells
        n_judged=judged,
        n_unparsed=n - judged,
        unparsed_rate=(n - judged) / n if n else None,
        unparsed_reasons=dict(sorted(reasons.items(), key=lambda kv: -kv[1])),
        unparsed_examples=examples,
        n_truncated=n_cut,
        truncated_rate=n_cut / n if n else None,
        n_reasoning_unfinished=(n_think := sum(s.n_reasoning_unfinished for s in summaries)),
        reasoning_unfinished_rate=n_think / n if n else None,
        reasoning_unfinished_causes={
            c: sum(s.reasoning_unfinished_causes.get(c, 0) for s in summaries)
            for c in dict.fromkeys(c for s in summaries for c in s.reasoning_unfinished_causes)
        },
        # cells of different modes count them differently: the run's line names the verdicts used
        reasoning_unfinished_counted_as=" / ".join(
            dict.fromkeys(s.reasoning_unfinished_counted_as for s in summaries if s.reasoning_unfinished_counted_as)
        )
        or None,
        n_reasoning_tokens=sum(m.n_reasoning_tokens or 0 for m in gen_metas),
        n_skipped=sum(s.n_skipped for s in summaries),
        skipped_items=[
            {"cell": key, "judge": s.leaderboard[0]["judge"], **e}
            for key, (s, _) in cells.items()
            for e in s.skipped_items
        ],
        leaderboard=[row for s in summaries for row in s.leaderboard],
        paired=paired.paired_table(exp, cells),
        cells={k: s.to_dict() for k, (s, _) in cells.items()},
        across_cells=across,
        placement_warnings=list(dict.fromkeys(w for s in summaries for w in s.placement_warnings)),
        shards=_shard_rows(gen_metas),
        generator={"names": list(exp.generators), "models": {k: v["model"] for k, v in exp.generators.items()}},
        judge={"names": list(exp.judges), "models": {k: v["model"] for k, v in exp.judges.items()}},
    )
    return run, cells


def _of_study(attempts, exp) -> list[dict]:
    """The attempts of jobs the study still has (`role`/`job` as genjudge.store.failures records them)."""

    def kept(a) -> bool:
        head = a["job"].split("/")
        if a["role"] == "generate":
            return len(head) == 3 and head[0] in exp.generators and head[1] in exp.datasets
        return head[0] in exp.judges

    return [a for a in attempts if kept(a)]


def time_model_check(config: dict, gen_metas: list, judge_metas: dict) -> dict:
    """Each model job's predicted seconds (the time model on its own counts) against its measured ones."""
    from genjudge.engine.devices import measure_cpu
    from genjudge.planning import calibration
    from genjudge.planning.time_model import GB

    gens = [(f"generate {m.generator}/{m.dataset}/{m.shard}", m) for m in gen_metas]
    judges = [(f"judge {j}/{i}", job) for j, meta in judge_metas.items() for i, job in enumerate(meta.jobs())]
    return calibration.summary(calibration.checks(gens, judges, measure_cpu, config["plan"]["load_gb_per_s"] * GB))


def summary_of(config: dict, judgments: dict, gen_metas: list, judge_metas: dict):
    """summary.json's figures from the judgments frames (as read from judgments/<judge>.parquet) and
    the jobs' metas, without the time model and provenance: (run summary, cells, study). Failed cells
    are set apart; skipped answers are counted and listed, and left out of every measure."""
    from genjudge.config.experiment import entry_keys, resolve
    from genjudge.stages.validity import summarise_validity

    study = Study.of(resolve(config), config.get("panels") or {}, gen_metas, judge_metas)  # failed cells set apart
    exp = study.exp
    parts = {j: split_skipped(df) for j, df in judgments.items() if j in exp.judges}
    judgments = {j: kept for j, (kept, _) in parts.items()}
    run, cells = summarise_experiment(
        exp, config, judgments, study.gen_metas, study.judge_metas, {j: gone for j, (_, gone) in parts.items()}
    )
    run.validity = summarise_validity(
        exp, judgments, panels=study.panels, labels_keys=entry_keys(config, "judge", exp.judges, "labels")
    )
    unparsed_failed, run.warnings = unparsed_checks(config, cells)
    study.failed = [*study.failed, *unparsed_failed]
    study.add_to(run)
    return run, cells, study


UNPARSED_WARN = 0.2  # a cell with more of its answers unparsed than this gets a warning at the top of the page
POSITION_WARN = 0.5  # a pairwise cell whose verdicts held under swapping the answers less often than this: a warning
EXAMPLE_CHARS = 300  # of a judge's raw output, in a failed cell's error


def unparsed_checks(config: dict, cells: dict) -> tuple[list[dict], list[str]]:
    """(failed cells, warnings) from the judge's own work: the requests it was asked (`decided_by` "judge"),
    not the verdicts the cascade's rules or `report.unfinished_reasoning: incorrect` supplied, which would
    hide a judge that parsed nothing. A cell where the judge was asked and none of its verdicts parsed (or
    where no answer got a verdict at all) is a failed cell (stage `parse`: its most common cause and an
    example of the judge's raw output); one where more than UNPARSED_WARN of the judge's verdicts did not
    parse gets a warning for the top of the report."""
    failed, warnings = [], []
    for s, df in cells.values():
        row = s.leaderboard[0]
        if not s.n_answers:
            continue
        judge = row["judge"]
        cell = f"{row['generator']}/{row['dataset']}" + (f" vs {row['opponent']}" if row["opponent"] else "")
        asked = df[df["decided_by"] == "judge"] if "decided_by" in df else df
        n_asked = len(asked)
        n_parsed = int(asked["verdict"].notna().sum())
        others = s.n_judged - n_parsed  # verdicts the rules or the unfinished-reasoning policy gave
        reasons = asked.loc[asked["verdict"].isna(), "unparsed_reason"].astype(str).map(lambda r: cause_of(r, None)[0])
        if n_asked and len(reasons):
            most = reasons.value_counts()
            cause, k = most.index[0], int(most.iloc[0])
        else:
            cause, k = next(iter(s.unparsed_reasons.items()), ("no verdict", s.n_unparsed))
        if s.n_judged == 0 or (n_asked and n_parsed == 0):
            pool = asked if n_asked else df
            hit = pool[pool["unparsed_reason"].astype(str).map(lambda r: cause_of(r, None)[0]) == cause]
            example = hit.iloc[0] if len(hit) else pool.iloc[0]
            text = " ".join(str(example.get("judge_output") or "").split())
            raw = (
                f"item {example['id']!r}'s raw judge output: {text[:EXAMPLE_CHARS]!r}"
                + ("..." if len(text) > EXAMPLE_CHARS else "")
                if text
                else f"item {example['id']!r} had no judge output (decided by {example.get('decided_by')})"
            )
            n = n_asked or s.n_answers
            also = (
                f" (the other {others} verdicts came from rules or report.unfinished_reasoning, not the judge)"
                if n_asked and others
                else ""
            )
            failed.append(
                {
                    "judge": judge,
                    "generator": row["generator"],
                    "dataset": row["dataset"],
                    "opponent": row["opponent"],
                    "stage": "parse",
                    "errors": [
                        {
                            "judge": judge,
                            "type": "NoVerdictParsed",
                            "message": (
                                f"none of the {n} verdicts of judge {judge!r} parsed{also}; most common cause: "
                                f"{cause} ({k} of {n}); {raw}. Check the judge's template and "
                                f"verdict pattern (judges.{judge}.template, .pattern) against this output."
                            ),
                            "log": f"logs/{config['run']}/parse_verdicts/{judge}.log",
                        }
                    ],
                }
            )
        elif n_asked and (n_asked - n_parsed) / n_asked > UNPARSED_WARN:
            rate = (n_asked - n_parsed) / n_asked
            by = f" ({others} of them decided by rules or report.unfinished_reasoning)" if others else ""
            warnings.append(
                f"{cell} (judge {judge}): {n_asked - n_parsed} of {n_asked} verdicts ({pct(rate)}) were "
                f"not parsed, most often: {cause} ({k}); the measures are over the {s.n_judged} answers with a "
                f"verdict only{by}."
            )
        elif not n_asked and s.unparsed_rate is not None and s.unparsed_rate > UNPARSED_WARN:
            warnings.append(
                f"{cell} (judge {judge}): {s.n_unparsed} of {s.n_answers} answers ({pct(s.unparsed_rate)}) got "
                f"no verdict, most often: {cause} ({k}); the measures are over the {s.n_judged} with one only."
            )
        if "position_consistent" in df:
            both = df["position_consistent"][df["verdict"].notna() & df["position_consistent"].notna()]
            flipped = int((~both.astype(bool)).sum())
            if len(both) and flipped / len(both) > 1 - POSITION_WARN:
                said = int((df["verdict"] == "tie").sum()) - flipped
                warnings.append(
                    f"{cell} (judge {judge}): the verdict changed with the answers' order in {flipped} of "
                    f"{len(both)} pairs (position consistency {pct(1 - flipped / len(both))}); each such pair "
                    f"counts as a tie, as FastChat counts it, so of the {said + flipped} ties only {said} were "
                    "the judge's own, and the win rate is drawn toward 50% by the judge's position bias."
                )
    return failed, warnings


def run_report(job: ReportJob) -> RunSummary:
    """summary.json, report.md, per_category.csv, provenance.json and report.html of the run. The job's
    `attempts` are the run's recorded failed attempts, for the page's timeline; those of generators,
    datasets and judges no longer in the config are left out."""
    from genjudge.config.experiment import resolve
    from genjudge.stages.validity import with_validity

    config, judgments_paths, gen_meta_paths, judge_meta_paths = (
        job.config,
        job.judgments,
        job.gen_metas,
        job.judge_metas,
    )
    summary_path, md_path, provenance_path, categories_path = (
        job.summary_path,
        job.md_path,
        job.provenance_path,
        job.categories_path,
    )
    workflow_dir, html_path, plots_dir, attempts = job.workflow_dir, job.html_path, job.plots_dir, job.attempts
    gen_metas = [GenerateMeta.read(p) for p in gen_meta_paths]
    judge_metas = {j: JudgeMeta.read(p) for j, p in judge_meta_paths.items()}
    endpoints = endpoint_rows(gen_metas, judge_metas)  # every endpoint job that ran, its cells' fate aside
    full = resolve(config)
    run, cells, study = summary_of(
        config, {j: read_judgments(p) for j, p in judgments_paths.items()}, gen_metas, judge_metas
    )
    gen_metas, judge_metas, exp = study.gen_metas, study.judge_metas, study.exp
    run.time_model = time_model_check(config, gen_metas, judge_metas)
    run.endpoints = endpoints
    atomic.write_json(provenance_path, provenance(config, exp, gen_metas, judge_metas, workflow_dir))
    run.write(summary_path)
    n_examples = int(config["report"]["n_examples"])
    if len(cells) == 1:
        s, df = next(iter(cells.values()))
        text = render_markdown(s, df, n_examples)
    else:
        text = render_experiment(run, cells, n_examples)
    text = study.markdown(with_validity(text, run.validity))
    text += "\n" + "\n".join([*endpoint_markdown(run.endpoints), *time_model_markdown(run.time_model)])
    atomic.write_text(md_path, text)
    frames = []
    for s, _ in cells.values():
        row = s.leaderboard[0]
        f = category_frame(s)
        for i, k in enumerate(("generator", "dataset", "judge", "opponent")):
            f.insert(i, k, row[k])
        frames.append(f)
    with atomic.atomic_path(categories_path) as tmp:
        (pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["generator"])).to_csv(
            tmp, index=False
        )
    if html_path:
        from genjudge.report_html import write_html_report

        with open(provenance_path, encoding="utf-8") as fh:
            prov = json.load(fh)
        write_html_report(
            run,
            cells,
            gen_metas,
            judge_metas,
            prov,
            html_path,
            plots_dir,
            _of_study(attempts, full),
            gpu_inventory=config.get("gpu_inventory"),
            n_examples=n_examples,
        )
    return run
