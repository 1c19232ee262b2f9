"""The endpoint engine at the engine seam: the same calls as a local model's (`engine.completion`),
from the job's typed spec.

An item's key holds what decides its result: the endpoint's public base URL and the model's name (in
place of a local model's fingerprint), every request setting (`item_params`: max_new_tokens, sampling,
extra_body, prefill...) and the messages as sent. The API key is in none of them. Only a successful,
complete response is stored, the moment it arrives; a rerun sends only what is not stored.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from pathlib import Path

from genjudge.engine.endpoint.cost import Budget
from genjudge.engine.endpoint.requests import LogprobVerdict, body, messages, with_prefill
from genjudge.engine.endpoint.settings import Endpoint
from genjudge.engine.endpoint.tries import Tries, ledger_path, unsettled
from genjudge.errors import InputError
from genjudge.models.endpoints import identity
from genjudge.store.item_store import item_key

log = logging.getLogger("endpoint")


class EndpointPromptSet:
    """A model behind an endpoint and the keyed prompts it will complete (no tokenizer, no weights)."""

    engine = "openai"

    def __init__(self, spec, kind: str, suffix: str = "", verdict: LogprobVerdict | None = None, where: str = ""):
        t0 = time.monotonic()
        self.spec = spec
        self.kind = kind
        self.where = where or ("judge" if kind.startswith("judge") else "generator")
        self.endpoint = Endpoint.of(spec)
        self.verdict = verdict
        self.suffix = suffix
        self.chat = True
        self.tok = None
        self.fp = identity(self.endpoint.url, spec.model)
        self.sampling = bool(getattr(spec, "do_sample", False)) and verdict is None
        self.info: dict = {}
        self.probed: dict | None = None
        # One budget per job, over all its completions (a conversation's turns).
        self.budget = Budget(self.endpoint.price, self.endpoint.max_cost_usd, batch=self.endpoint.batch)
        self._counted: set = set()  # keys whose earlier cost the budget holds
        self._probes_counted = False  # the earlier attempts' probes, likewise
        self.setup_seconds = time.monotonic() - t0

    def check_labels(self, labels, marker) -> None:
        """Labels are matched to the listed tokens per response (requests.label_logprobs)."""

    def render(self, texts: list[str], conversations: list | None = None) -> list[str]:
        """The messages of each prompt as sent, as JSON text (the item's prompt and its key's)."""
        conversations = conversations or [None] * len(texts)
        return [
            json.dumps(
                with_prefill(messages(t, self.spec.system_prompt, c), self.verdict, self.endpoint.prefill),
                ensure_ascii=False,
            )
            for t, c in zip(texts, conversations)
        ]

    def key(self, prompt: str, sample: int | None = None) -> str:
        parts = dict(kind=self.kind, model=self.fp, params=self.spec.item_params(), prompt=prompt)
        return item_key(**parts) if sample is None else item_key(**parts, sample=sample)

    def seed(self, prompt: str, sample: int) -> int:
        from genjudge.engine.sampling import sample_seed

        return sample_seed(self.spec.seed, self.key(prompt), sample)


def complete_endpoint(
    pset: EndpointPromptSet,
    texts: list[str],
    ids: list[str],
    store,
    desc: str,
    log_stream,
    conversations: list | None = None,
    samples: list[int] | None = None,
    keep_going: bool = False,
):
    """engine.completion.complete for an endpoint model; `incomplete` of the result names the items
    the retry budget or max_cost_usd left without a result (each with why)."""
    from genjudge.engine import collector
    from genjudge.engine.results import Completion, keyed, to_compute

    collector.resume()  # paused for a model's loading, which an endpoint job has none of
    spec, ep = pset.spec, pset.endpoint
    prompts = pset.render(texts, conversations)
    keys, samples = keyed(pset, prompts, samples, pset.sampling)
    done = store.load(set(keys))
    todo, queued = to_compute(keys, done)  # identical requests are sent once
    log.info(
        "%s: %d items, %d already done (checkpoint/cache), %d to request from %s",
        desc,
        len(keys),
        sum(k in done for k in keys),
        len(todo),
        ep.url,
    )
    budget = pset.budget
    for k, rec in done.items():  # what this job's earlier attempts paid counts against its budget
        if rec.get("job") == store.writer and k not in pset._counted:
            pset._counted.add(k)
            budget.stored(rec.get("cost_usd"))
    # ... and what they paid for and did not store: their capability probes, and answers thrown away
    probes, unkept = (Path(store.directory) / d / f"{store.writer}.jsonl" for d in ("probes", "unkept"))
    tried = ledger_path(store.directory, store.writer)  # tries sent, settled once their outcome is known
    if not pset._probes_counted:
        pset._probes_counted = True
        for ledger in (probes, unkept):
            if ledger.exists():
                for line in ledger.read_text().splitlines():
                    budget.stored(json.loads(line)["cost_usd"] if line.strip() else 0.0)
        # ... and, at their worst case, their tries that may have been billed: no answer, or killed in flight
        n_unknown, usd = unsettled(tried)
        if n_unknown:
            budget.stored_unknown(usd)
            log.info(
                "%s: %d tries of earlier attempts got no answer: up to $%.4f possibly billed", desc, n_unknown, usd
            )
    setup, pset.setup_seconds = pset.setup_seconds, 0.0
    stats, too_long, incomplete, computed = None, {}, {}, 0
    t1 = time.monotonic()
    bodies = [
        body(
            spec, ep, json.loads(prompts[i]), pset.seed(prompts[i], samples[i]) if pset.sampling else None, pset.verdict
        )
        for i in todo
    ]
    probing = bool(todo) and pset.probed is None and spec.endpoint["check_capabilities"]
    from genjudge.engine.endpoint.probe import probe, probe_body, tries

    first = [bodies[0]] if todo else []
    if probing:
        first += [probe_body(spec, ep, pset.verdict)] * tries(spec, pset.verdict)
    if todo and not budget.affords(*first):  # not even the probe and one request can be sent
        log.warning(
            "%s: max_cost_usd %g reached (spent $%.4f, possibly billed $%.4f); no request is sent",
            desc,
            ep.max_cost_usd,
            budget.spent,
            budget.possibly,
        )
        incomplete = {i: "not sent: max_cost_usd reached" for i, k in enumerate(keys) if k in queued}
        stats = endpoint_stats(pset, None, budget)
        stats["not_sent"] = len(todo)
        todo = []
    if todo:
        key = ep.api_key()
        if probing:
            t0 = time.monotonic()
            try:
                probed = probe(spec, ep, key, pset.where, pset.verdict)
            except InputError as exc:  # what its tries were billed counts for the rerun too
                if ep.price.known and exc.usage:
                    b = probe_body(spec, ep, pset.verdict)
                    spent_on(probes, sum(budget.paid(None, b, p, c, batch=False) for p, c in exc.usage))
                raise
            paid = [budget.paid(None, probed["body"], p, c, batch=False) for p, c in probed.pop("usage")]
            probed.pop("body")
            if ep.price.known:
                spent_on(probes, sum(paid))
            pset.probed = probed
            setup += time.monotonic() - t0
            log.info("%s: capability probe passed (served model %s)", desc, pset.probed.get("served_model"))

        def on_result(j: int, res: dict) -> None:
            i = todo[j]
            extra = {"sample": samples[i]} if pset.sampling else {}
            rec = {**res, "key": keys[i], "id": ids[i], "job": store.writer, **extra}
            store.append([rec])
            done[keys[i]] = rec
            pset._counted.add(keys[i])

        names = [str(ids[i]) for i in todo]
        if ep.batch:
            from genjudge.engine.endpoint.batch import BatchSender

            sender = BatchSender(
                ep,
                budget,
                on_result,
                pset.verdict,
                names,
                desc,
                store,
                [keys[i] for i in todo],
                lambda c: spent_on(unkept, c),
            )
        else:
            from genjudge.engine.endpoint.client import Sender

            sender = Sender(
                ep,
                budget,
                on_result,
                pset.verdict,
                names,
                desc,
                on_unkept=lambda c: spent_on(unkept, c),
                tries=Tries(tried if ep.price.known else None),
            )
        report = sender.run(bodies, key)
        computed = report.done
        if report.refused:
            raise InputError(f"{desc}: {ep.url} refused a request ({report.refused}); nothing more was sent")
        by_key = {keys[todo[j]]: why for j, why in report.too_long.items()}
        if by_key and not keep_going:
            j = min(report.too_long)
            raise InputError(
                f"{desc}: item {ids[todo[j]]!r} is too long for {spec.model} at {ep.url}: {report.too_long[j]} "
                f"(the dataset's on_too_long: skip would skip it)"
            )
        too_long = {i: by_key[k] for i, k in enumerate(keys) if k in by_key}
        stopped = {keys[todo[j]]: why for j, why in report.failed.items()}
        for j in report.unsent:
            stopped.setdefault(keys[todo[j]], "not sent: " + ("max_cost_usd reached" if budget.stopped else "stopped"))
        incomplete = {i: stopped[k] for i, k in enumerate(keys) if k in stopped}
        stats = endpoint_stats(pset, report, budget)
    results = [None if i in too_long or i in incomplete else done.get(k) for i, k in enumerate(keys)]
    tokens, computed_keys = computed_of(keys, todo, done)
    info = {
        "engine": "openai",
        "endpoint": stats or endpoint_stats(pset, None, budget),
        "engine_settings": {"base_url": ep.url, "max_connections": ep.max_connections, "batch": ep.batch},
    }
    return Completion(
        prompts,
        keys,
        results,
        len(keys) - sum(k in queued for k in keys),
        computed,
        pset.fp,
        True,
        0.0,
        time.monotonic() - t1 if todo else 0.0,
        None,
        info,
        tokens,
        computed_keys,
        setup_seconds=setup,
        too_long=too_long,
        incomplete=incomplete,
    )


def spent_on(ledger: Path, cost: float) -> None:
    """A line of what this job paid for and did not store (probes/, unkept/), which later attempts count."""
    ledger.parent.mkdir(parents=True, exist_ok=True)
    with open(ledger, "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"cost_usd": cost, "at": round(time.time(), 3)}) + "\n")


def computed_of(keys: list[str], todo: list[int], done: dict) -> tuple[int, set]:
    """(the tokens generated now, the keys computed now): of the requests sent (`todo`), those stored."""
    sent = {keys[i] for i in todo}  # once: a set per stored item made this quadratic in the job's items
    got = sent & done.keys()
    return sum(done[k]["n_generated_tokens"] for k in got), got


def endpoint_stats(pset: EndpointPromptSet, report, budget: Budget) -> dict:
    """The endpoint's part of the job's meta: what was asked, what came back, what it cost."""
    ep = pset.endpoint
    out = {
        "base_url": ep.url,
        "model": pset.spec.model,
        "batch": ep.batch,
        "max_connections": ep.max_connections,
        "probe": pset.probed,
        "requests": 0,
        "completed": 0,
        "retries": {},
        "given_up": {},
        "too_long": 0,
        "not_sent": 0,
        "wait_seconds": 0.0,
        "seconds": 0.0,
        "requests_per_second": None,
        "prompt_tokens": budget.prompt_tokens,
        "completion_tokens": budget.completion_tokens,
        "cost_usd": round(budget.spent - budget.earlier, 6) if ep.price.known else None,
        "cost_usd_earlier_attempts": round(budget.earlier, 6) if ep.price.known else None,
        "max_cost_usd": ep.max_cost_usd,
        "budget_stopped": budget.stopped,
        "served_models": {},
        "system_fingerprints": {},
        "lowest_concurrency": None,
        "rate_limit_cuts": 0,
        "unkept": 0,  # answers billed and thrown away (no logprobs, no choice), counted in cost_usd
        # Tries with no answer (timed out, dropped, cut off, stopped in flight), which a provider may bill:
        # their worst case, counted against max_cost_usd beside cost_usd.
        "unknown_outcome": 0,
        "possibly_billed_usd": round(budget.possibly - budget.possibly_earlier, 6) if ep.price.known else None,
        "possibly_billed_usd_earlier_attempts": round(budget.possibly_earlier, 6) if ep.price.known else None,
    }
    if report is not None:
        out.update(
            requests=report.requests,
            completed=report.done,
            retries=dict(report.retries),
            given_up=dict(report.given_up),
            too_long=len(report.too_long),
            not_sent=len(report.unsent),
            wait_seconds=round(report.wait_seconds, 3),
            seconds=round(report.seconds, 3),
            requests_per_second=round(report.done / report.seconds, 3) if report.seconds else None,
            served_models={str(k): v for k, v in report.served_models.items()},
            system_fingerprints={str(k): v for k, v in report.fingerprints.items()},
            lowest_concurrency=report.lowest_concurrency,
            rate_limit_cuts=report.rate_limit_cuts,
            unkept=report.unkept,
            unknown_outcome=getattr(report, "unknown", 0),
        )
        if getattr(report, "batches", None) is not None:
            out["batches"] = report.batches
    return out


SUMMED = (
    "requests",
    "completed",
    "too_long",
    "not_sent",
    "wait_seconds",
    "seconds",
    "rate_limit_cuts",
    "unkept",
    "unknown_outcome",
)


def merged_stats(parts: list[dict]) -> dict:
    """One job's endpoint stats from its completions' (a conversation's turns): counts summed; the
    budget's figures (one budget per job) are the last completion's."""
    parts = [p for p in parts if p]
    if len(parts) <= 1:
        return parts[0] if parts else {}
    out = dict(parts[-1])
    for name in SUMMED:
        out[name] = sum(p.get(name) or 0 for p in parts)  # metas before a count was added lack it
    for name in ("retries", "given_up", "served_models", "system_fingerprints"):
        out[name] = dict(sum((Counter(p[name]) for p in parts), Counter()))
    out["budget_stopped"] = any(p["budget_stopped"] for p in parts)
    out["probe"] = next((p["probe"] for p in parts if p["probe"]), None)
    lows = [p["lowest_concurrency"] for p in parts if p["lowest_concurrency"] is not None]
    out["lowest_concurrency"] = min(lows) if lows else None
    out["requests_per_second"] = round(out["completed"] / out["seconds"], 3) if out["seconds"] else None
    return out
