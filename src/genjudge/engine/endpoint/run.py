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

from genjudge.engine.endpoint.cost import Budget
from genjudge.engine.endpoint.ledgers import Ledgers, spent_on
from genjudge.engine.endpoint.requests import LogprobVerdict, body, messages, with_prefill
from genjudge.engine.endpoint.settings import SECRETS, Endpoint, scrubbed
from genjudge.engine.endpoint.stats import endpoint_stats, summary_line
from genjudge.engine.endpoint.tries import Tries
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
        self.probe_requests = 0  # the capability probe's requests (counted among the requests sent)
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


def probe_id(pset, probe_body_: dict) -> str:
    """What the capability probe checked: the endpoint's public URL and the probe's request (the model,
    the settings it relies on), never the key."""
    return item_key(url=pset.endpoint.url, body=probe_body_, headers=sorted(k for k, _ in pset.endpoint.extra_headers))


def hints(pset) -> dict:
    """The setting that would have caught each non-transient failure, for the circuit breaker's message."""
    where = pset.where
    checked = pset.spec.endpoint["check_capabilities"]
    capability = (
        f"{where}.endpoint.check_capabilities: true checks this with one request before any item is sent"
        if not checked
        else f"check what {where}.endpoint.base_url returns for {pset.spec.model!r}"
    )
    filtered = f"the provider's filter withholds every answer: check the prompts and {where}.endpoint.on_filtered"
    return {"incomplete": capability, "content_filter": filtered, "tool_calls": filtered}


@scrubbed
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
    the retry budget or max_cost_usd left without a result (each with why). What it returns and raises
    is redacted (settings.scrubbed): no path out of the endpoint engine carries a secret."""
    from genjudge.engine import collector
    from genjudge.engine.results import keyed, to_compute

    collector.resume()  # paused for a model's loading, which an endpoint job has none of
    ep, ledgers = pset.endpoint, Ledgers(store)
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
            budget.stored(rec.get("cost_usd"), rec.get("n_prompt_tokens"), rec.get("completion_tokens"))
            budget.stored_unknown(rec.get("possibly_billed_usd"))
    if not pset._probes_counted:  # ... and what they paid for and did not store
        pset._probes_counted = True
        ledgers.count_earlier(budget, desc)
    setup, pset.setup_seconds = pset.setup_seconds, 0.0
    t1 = time.monotonic()
    bodies = [
        body(
            pset.spec,
            ep,
            json.loads(prompts[i]),
            pset.seed(prompts[i], samples[i]) if pset.sampling else None,
            pset.verdict,
        )
        for i in todo
    ]
    report, stats = None, None
    if todo and not _budget_allows(pset, ledgers, bodies[0], desc):
        stats = endpoint_stats(pset, None, budget)
        stats["not_sent"] = len(todo)
        incomplete = {i: "not sent: max_cost_usd reached" for i, k in enumerate(keys) if k in queued}
        return _completion(
            pset,
            prompts,
            keys,
            done,
            queued,
            todo=[],
            report=None,
            stats=stats,
            t1=t1,
            setup=setup,
            too_long={},
            incomplete=incomplete,
        )
    probes_before = pset.probe_requests
    if todo:
        ledgers.hold(desc)
        key = ep.api_key(pset.where)
        setup += _probe(pset, ledgers, desc, key) if pset.probed is None else 0.0
        report = _send(pset, ledgers, store, desc, key, keys, ids, samples, todo, bodies, done)
        if budget.stopped:
            ledgers.stop(budget)
    too_long, incomplete = _outcomes(pset, report, keys, ids, todo, desc, keep_going)
    if report is not None:
        stats = endpoint_stats(pset, report, budget, pset.probe_requests - probes_before)
        log.info("%s: %s", desc, summary_line(stats))
    return _completion(pset, prompts, keys, done, queued, todo, report, stats, t1, setup, too_long, incomplete)


def _budget_allows(pset, ledgers: Ledgers, first: dict, desc: str) -> bool:
    """Whether the job may send anything: not where an earlier attempt stopped at this budget (the same
    command again sends nothing more), nor where the probe and one request do not fit."""
    from genjudge.engine.endpoint.probe import probe_body, tries

    ep, budget = pset.endpoint, pset.budget
    if ep.max_cost_usd is None or not ep.price.known:
        return True
    stopped_at = ledgers.stopped_at()
    if stopped_at is not None and ep.max_cost_usd <= stopped_at:
        budget.stopped = True
        log.warning(
            "%s: an earlier attempt stopped at max_cost_usd %g (spent $%.4f, possibly billed $%.4f); no request "
            "is sent: rerun with a larger budget to go on",
            desc,
            stopped_at,
            budget.spent,
            budget.possibly,
        )
        return False
    first = [first]
    if pset.probed is None and pset.spec.endpoint["check_capabilities"]:
        b = probe_body(pset.spec, ep, pset.verdict)
        if ledgers.passed_probe(probe_id(pset, b)) is None:
            first += [b] * tries(pset.spec, pset.verdict)
    if budget.affords(*first):
        return True
    log.warning(
        "%s: max_cost_usd %g reached (spent $%.4f, possibly billed $%.4f); no request is sent",
        desc,
        ep.max_cost_usd,
        budget.spent,
        budget.possibly,
    )
    ledgers.stop(budget)
    return False


def _probe(pset, ledgers: Ledgers, desc: str, key: str) -> float:
    """The capability probe, once per job and not again where this job's earlier attempt passed the same
    one; what its tries were billed counts in the budget, passed or not. Returns its seconds."""
    from genjudge.engine.endpoint.probe import probe, probe_body

    spec, ep, budget = pset.spec, pset.endpoint, pset.budget
    if not spec.endpoint["check_capabilities"]:
        return 0.0
    t0 = time.monotonic()
    b = probe_body(spec, ep, pset.verdict)
    pid = probe_id(pset, b)
    earlier = ledgers.passed_probe(pid)
    if earlier is not None:
        pset.probed = {**earlier, "skipped": "passed by an earlier attempt of this job"}
        log.info(
            "%s: capability probe passed by an earlier attempt (served model %s)", desc, earlier.get("served_model")
        )
        return 0.0

    def priced(usage: list) -> float:
        return sum(
            budget.unbilled(None, b) if u is None else budget.paid(None, b, *u, batch=False) or 0.0 for u in usage
        )

    try:
        probed = probe(spec, ep, key, pset.where, pset.verdict)
    except InputError as exc:  # what its tries were billed counts for the rerun too
        usage = getattr(exc, "usage", None) or []
        pset.probe_requests += len(usage)
        cost = priced(usage)
        if ep.price.known and usage:
            spent_on(ledgers.probes, cost)
        raise
    usage = probed.pop("usage")
    probed.pop("body")
    pset.probe_requests += len(usage)
    cost = priced(usage)  # its tokens count whether or not the price is known
    if ep.price.known:
        spent_on(ledgers.probes, cost)
    pset.probed = probed
    ledgers.probe_passed(pid, probed)
    log.info("%s: capability probe passed (served model %s)", desc, probed.get("served_model"))
    return time.monotonic() - t0


def _send(pset, ledgers: Ledgers, store, desc, key, keys, ids, samples, todo, bodies, done):
    """The requests of `todo`, each result stored the moment it arrives; the sender's report."""
    ep = pset.endpoint

    def on_results(got: list) -> None:
        """Results (index, result) stored in one append: one fsync for all of them."""
        recs = []
        for j, res in got:
            i = todo[j]
            extra = {"sample": samples[i]} if pset.sampling else {}
            recs.append({**res, "key": keys[i], "id": ids[i], "job": store.writer, **extra})
        store.append([SECRETS.scrub(rec, exact=True) for rec in recs])
        for rec in recs:
            done[rec["key"]] = rec
            pset._counted.add(rec["key"])

    on_results.batched = True

    def on_result(j: int, res: dict) -> None:
        on_results([(j, res)])

    names = [str(ids[i]) for i in todo]
    reasoning = (pset.spec.reasoning["open"], pset.spec.reasoning["close"]) if pset.spec.reasoning else None
    if ep.batch:
        from genjudge.engine.endpoint.batch import BatchSender

        sender = BatchSender(
            ep,
            pset.budget,
            on_result,
            pset.verdict,
            names,
            desc,
            store,
            [keys[i] for i in todo],
            lambda c: spent_on(ledgers.unkept, c),
            reasoning=reasoning,
            items=[{"id": ids[i], **({"sample": samples[i]} if pset.sampling else {})} for i in todo],
        )
    else:
        from genjudge.engine.endpoint.client import Sender

        sender = Sender(
            ep,
            pset.budget,
            on_results,
            pset.verdict,
            names,
            desc,
            on_unkept=lambda c: spent_on(ledgers.unkept, c),
            tries=Tries(ledgers.tries if ep.price.known else None),
            reasoning=reasoning,
            hints=hints(pset),
        )
    report = sender.run(bodies, key)
    if report.refused:
        raise InputError(f"{desc}: {ep.url} refused a request ({report.refused}); nothing more was sent")
    return report


def _outcomes(pset, report, keys, ids, todo, desc, keep_going) -> tuple[dict, dict]:
    """(too_long, incomplete) by position: items the server found too long, and items without a result."""
    if report is None:
        return {}, {}
    by_key = {keys[todo[j]]: why for j, why in report.too_long.items()}
    if by_key and not keep_going:
        j = min(report.too_long)
        raise InputError(
            f"{desc}: item {ids[todo[j]]!r} is too long for {pset.spec.model} at {pset.endpoint.url}: "
            f"{report.too_long[j]} (the dataset's on_too_long: skip would skip it)"
        )
    too_long = {i: by_key[k] for i, k in enumerate(keys) if k in by_key}
    stopped = {keys[todo[j]]: why for j, why in report.failed.items()}
    for j in report.unsent:
        stopped.setdefault(keys[todo[j]], "not sent: " + ("max_cost_usd reached" if pset.budget.stopped else "stopped"))
    return too_long, {i: stopped[k] for i, k in enumerate(keys) if k in stopped}


def _completion(pset, prompts, keys, done, queued, todo, report, stats, t1, setup, too_long, incomplete):
    from genjudge.engine.results import Completion

    ep = pset.endpoint
    results = [None if i in too_long or i in incomplete else done.get(k) for i, k in enumerate(keys)]
    tokens, computed_keys = computed_of(keys, todo, done)
    info = {
        "engine": "openai",
        "endpoint": stats or endpoint_stats(pset, None, pset.budget),
        "engine_settings": {"base_url": ep.url, "max_connections": ep.max_connections, "batch": ep.batch},
    }
    return Completion(
        prompts,
        keys,
        results,
        len(keys) - sum(k in queued for k in keys),
        report.done if report is not None else 0,
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


def computed_of(keys: list[str], todo: list[int], done: dict) -> tuple[int, set]:
    """(the tokens generated now, the keys computed now): of the requests sent (`todo`), those stored."""
    sent = {keys[i] for i in todo}  # once: a set per stored item made this quadratic in the job's items
    got = sent & done.keys()
    return sum(done[k]["n_generated_tokens"] for k in got), got
