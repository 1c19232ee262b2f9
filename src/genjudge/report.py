"""The run's report: summary.json for machines, report.md for people."""

from __future__ import annotations

import json

import pandas as pd

from . import atomic
from .provenance import provenance
from .stats import wilson_interval


def _rate(k: int, n: int) -> dict:
    ci = wilson_interval(k, n)
    return {"value": (k / n) if n else None, "ci95": list(ci) if ci else None, "n": n}


def _pct(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ci(r: dict) -> str:
    return "" if not r["ci95"] else f" [{100 * r['ci95'][0]:.1f}, {100 * r['ci95'][1]:.1f}]"


def summarise(df: pd.DataFrame, gen_metas: list[dict], judge_meta: dict, config: dict) -> dict:
    n = len(df)
    parsed = df[df["verdict"].notna()]
    n_correct = int((parsed["verdict"] == "correct").sum())
    acc = _rate(n_correct, len(parsed))
    per_cat = {}
    for cat, g in df.groupby(df["category"].fillna("(none)"), sort=True):
        gp = g[g["verdict"].notna()]
        em = g["exact_match"].dropna()
        per_cat[str(cat)] = {"n_items": len(g), "n_judged": len(gp), "n_unparsed": len(g) - len(gp),
                             "accuracy": _rate(int((gp["verdict"] == "correct").sum()), len(gp)),
                             "exact_match": _rate(int(em.astype(bool).sum()), len(em))}
    em_all = df["exact_match"].dropna().astype(bool)
    both = parsed[parsed["exact_match"].notna()]
    agree = int(((both["verdict"] == "correct") == both["exact_match"].astype(bool)).sum())
    reasons = df["unparsed_reason"].dropna().value_counts().to_dict()
    shards = [{"shard": m["shard"], "n_items": m["n_items"], "cuda_visible_devices": m["cuda_visible_devices"],
               "hostname": m["hostname"], "load_seconds": m["load_seconds"],
               "generate_seconds": m["generate_seconds"], "resumed_items": m["resumed_items"],
               "computed_items": m["computed_items"], "tokens_per_second": m["tokens_per_second"],
               "wall_seconds": round(m["finished_at"] - m["started_at"], 3)}
              for m in sorted(gen_metas, key=lambda m: m["shard"])]
    warnings = []
    for m in [*gen_metas, judge_meta]:
        mp = m.get("memory_plan") or {}
        if mp.get("offloaded_to"):
            who = f"shard {m['shard']}" if "shard" in m else "judge"
            warnings.append(f"{who}: the memory plan put layers on {', '.join(mp['offloaded_to'])} "
                            f"({mp.get('recommendation', '')})")
    return {
        "run": config["run"],
        "placement_warnings": warnings,
        "n_items": n,
        "n_judged": len(parsed),
        "n_unparsed": n - len(parsed),
        "unparsed_rate": (n - len(parsed)) / n if n else None,
        "unparsed_reasons": reasons,
        "accuracy": acc["value"],
        "accuracy_ci95": acc["ci95"],
        "verdict_counts": parsed["verdict"].value_counts().to_dict(),
        "exact_match": _rate(int(em_all.sum()), len(em_all)),
        "judge_exact_match_agreement": _rate(agree, len(both)),
        "per_category": per_cat,
        "generator": {"model": config["generator"]["model"], "revision": config["generator"].get("revision"),
                      "max_new_tokens": config["generator"]["max_new_tokens"],
                      "load_seconds": round(sum(m["load_seconds"] for m in gen_metas), 3),
                      "generate_seconds": round(sum(m["generate_seconds"] for m in gen_metas), 3),
                      "resumed_items": sum(m["resumed_items"] for m in gen_metas),
                      "computed_items": sum(m["computed_items"] for m in gen_metas)},
        "judge": {"model": config["judge"]["model"], "mode": config["judge"]["mode"],
                  "quantization": config["judge"].get("quantization", "none"),
                  "cuda_visible_devices": judge_meta.get("cuda_visible_devices"),
                  "placement": judge_meta.get("placement"),
                  "load_seconds": judge_meta.get("load_seconds"), "judge_seconds": judge_meta.get("judge_seconds"),
                  "resumed_items": judge_meta.get("resumed_items"), "computed_items": judge_meta.get("computed_items")},
        "shards": shards,
    }


def _cell(text, width=80) -> str:
    text = "" if text is None else str(text)
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= width else text[: width - 1] + "…"


def render_markdown(s: dict, df: pd.DataFrame, n_examples: int = 3) -> str:
    out = [f"# Report: run `{s['run']}`", ""]
    out += [f"- Generator: `{s['generator']['model']}`", f"- Judge: `{s['judge']['model']}` "
            f"(mode {s['judge']['mode']}, quantization {s['judge']['quantization']}, "
            f"GPUs {s['judge']['cuda_visible_devices'] or 'none (CPU)'})", ""]
    for w in s.get("placement_warnings", []):
        out += [f"> **Warning:** {w}", ""]
    out += ["## Headline", "", "| measure | value |", "|---|---|",
            f"| items | {s['n_items']} |", f"| judged (parsed verdicts) | {s['n_judged']} |",
            f"| unparsed | {s['n_unparsed']} ({_pct(s['unparsed_rate'])}) |",
            f"| accuracy (judge, over parsed) | {_pct(s['accuracy'])}{_ci({'ci95': s['accuracy_ci95']})} |",
            f"| normalised exact match | {_pct(s['exact_match']['value'])}{_ci(s['exact_match'])} |",
            f"| judge agrees with exact match | {_pct(s['judge_exact_match_agreement']['value'])}"
            f"{_ci(s['judge_exact_match_agreement'])} |", ""]
    out += ["Intervals are 95% Wilson intervals. Unparsed verdicts are excluded from accuracy, never counted as wrong.", ""]
    out += ["## By category", "", "| category | items | judged | unparsed | accuracy | exact match |",
            "|---|---|---|---|---|---|"]
    for cat, c in s["per_category"].items():
        out.append(f"| {cat} | {c['n_items']} | {c['n_judged']} | {c['n_unparsed']} | "
                   f"{_pct(c['accuracy']['value'])}{_ci(c['accuracy'])} | {_pct(c['exact_match']['value'])} |")
    out.append("")
    if s["unparsed_reasons"]:
        out += ["## Unparsed verdicts", "", "| reason | count |", "|---|---|"]
        out += [f"| {r} | {k} |" for r, k in s["unparsed_reasons"].items()]
        out.append("")
    out += ["## Examples", ""]
    groups = [(v, df[df["verdict"] == v]) for v in sorted(df["verdict"].dropna().unique())]
    groups.append(("unparsed", df[df["verdict"].isna()]))
    for name, g in groups:
        if not len(g):
            continue
        out += [f"### {name}", "", "| id | question | reference | answer | judge said |", "|---|---|---|---|---|"]
        for row in g.head(n_examples).itertuples():
            out.append(f"| {_cell(row.id, 20)} | {_cell(row.prompt, 50)} | {_cell(row.reference, 30)} | "
                       f"{_cell(row.output, 50)} | {_cell(row.judge_output, 60)} |")
        out.append("")
    out += ["## Throughput", "", "Load time is paid once per job; when it dominates, use fewer, larger shards.", "",
            "| shard | items | GPUs | host | load s | generate s | tokens/s | resumed | computed |",
            "|---|---|---|---|---|---|---|---|---|"]
    for m in s["shards"]:
        out.append(f"| {m['shard']} | {m['n_items']} | {m['cuda_visible_devices'] or 'CPU'} | {m['hostname']} | "
                   f"{m['load_seconds']:.1f} | {m['generate_seconds']:.1f} | {m['tokens_per_second'] or '-'} | "
                   f"{m['resumed_items']} | {m['computed_items']} |")
    j = s["judge"]
    out += ["", f"Judge: load {j['load_seconds']} s, judging {j['judge_seconds']} s, "
            f"resumed {j['resumed_items']}, computed {j['computed_items']}; parameters per device: "
            f"{json.dumps(j['placement'])}", ""]
    return "\n".join(out)


def run_report(judgments_path, gen_meta_paths, judge_meta_path, config, summary_path, md_path,
               provenance_path, workflow_dir) -> dict:
    df = pd.read_parquet(judgments_path)
    gen_metas = [json.loads(open(p).read()) for p in gen_meta_paths]
    judge_meta = json.loads(open(judge_meta_path).read())
    s = summarise(df, gen_metas, judge_meta, config)
    atomic.write_json(provenance_path, provenance(config, gen_metas, judge_meta, workflow_dir))
    atomic.write_json(summary_path, s)
    atomic.write_text(md_path, render_markdown(s, df, int(config.get("report", {}).get("n_examples", 3))))
    return s
