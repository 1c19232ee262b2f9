"""Chat datasets: a conversation in the data is sent as the conversation, through the chat template."""

import json

import pandas as pd
from conftest import generate_shard
from judges import ROOT

from genjudge.config.specs import spec_for
from genjudge.data.dataset import load_items
from genjudge.data.shard_files import write_shard


def test_a_conversation_is_sent_with_its_system_and_few_shot_turns(tmp_path):
    conv = [
        {"role": "system", "content": "Answer with one word."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris"},
        {"role": "user", "content": "What is the capital of Peru?"},
    ]
    data = tmp_path / "chat.jsonl"
    data.write_text(
        json.dumps({"id": "c1", "messages": conv, "answer": "Lima"})
        + "\n"
        + json.dumps({"id": "p1", "messages": "What is 2 + 3?", "answer": "5"})
        + "\n"
    )
    items = load_items(data, {"id": "id", "prompt": "messages", "reference": "answer"})
    write_shard(tmp_path / "0.jsonl", items)
    spec = spec_for(
        "generator",
        model=str(ROOT / "models" / "demo-generator"),
        max_new_tokens=4,
        batch_size=2,
        system_prompt="Be brief.",
    )
    generate_shard(tmp_path, spec)
    sent = pd.read_parquet(tmp_path / "out.parquet").set_index("id")["prompt_sent"]
    chat = sent["c1"]
    # Every turn in order, the conversation's own system message instead of the configured one.
    order = [
        chat.index(t)
        for t in (
            "<|system|>\nAnswer with one word.",
            "<|user|>\nWhat is the capital of France?",
            "<|assistant|>\nParis",
            "<|user|>\nWhat is the capital of Peru?",
        )
    ]
    assert order == sorted(order) and "Be brief." not in chat and chat.endswith("<|assistant|>\n")
    # A plain prompt gets the configured system prompt.
    assert sent["p1"].index("<|system|>\nBe brief.") < sent["p1"].index("<|user|>\nWhat is 2 + 3?")
