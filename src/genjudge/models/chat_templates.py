"""What a model's chat template does, read from its files without loading the tokenizer: whether it
stamps today's date (`strftime_now`, as Llama 3.1-3.3 and SmolLM3 do)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from genjudge.models.modelref import is_local

TEMPLATE_FILES = ("chat_template.jinja", "chat_template.json", "tokenizer_config.json")


def _texts(raw: str, name: str) -> list[str]:
    if name.endswith(".jinja"):
        return [raw]
    template = json.loads(raw).get("chat_template")
    if isinstance(template, list):  # named templates: [{name, template}, ...]
        return [t.get("template") or "" for t in template if isinstance(t, dict)]
    return [template] if isinstance(template, str) else []


def template_texts(model: str, revision: str | None = None) -> list[str] | None:
    """The chat templates a checkpoint ships (a local directory, or a hub id in the local cache);
    None where its files cannot be read here."""
    files: dict[str, Path] = {}
    if is_local(model):
        path = Path(os.path.expanduser(model))
        if not path.is_dir():
            return None
        files = {n: path / n for n in TEMPLATE_FILES if (path / n).is_file()}
        files.update({f"extra/{p.name}": p for p in sorted(path.glob("additional_chat_templates/*.jinja"))})
    else:
        try:
            from huggingface_hub import try_to_load_from_cache
        except ImportError:  # pragma: no cover - the hub client ships with transformers
            return None
        for n in TEMPLATE_FILES:
            hit = try_to_load_from_cache(model, n, revision=revision)
            if isinstance(hit, str):
                files[n] = Path(hit)
        if "tokenizer_config.json" not in files:
            return None
    texts: list[str] = []
    for name, p in files.items():
        try:
            texts += _texts(p.read_text(encoding="utf-8"), name)
        except (OSError, ValueError, AttributeError):
            continue
    return texts


def stamps_date(model: str, revision: str | None = None) -> bool | None:
    """Whether the model's chat template writes today's date (transformers' `strftime_now`) into its
    prompts; None where its template cannot be read here (a hub model not in the local cache)."""
    texts = template_texts(model, revision)
    if texts is None:
        return None
    return any("strftime_now" in t for t in texts)
