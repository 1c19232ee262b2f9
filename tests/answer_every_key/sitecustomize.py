"""Put first on PYTHONPATH by tests/test_item_keys.py: every process the workflow starts finds a stored
result for every key it asks the item store for, so that a study's keys come from the jobs' own code
without loading a model or sending a request. A result is made from its key alone: the answers (and
the later turns' and the judges' prompts that hold them) are the same on every machine."""

import os

if os.environ.get("GENJUDGE_TEST_ANSWER_EVERY_KEY"):
    from genjudge.store import item_store

    def _load(self, wanted=None):
        return {
            k: {
                "key": k,
                "output": f"answer {k[:8]} VERDICT: CORRECT [[A]] SCORE: 7",
                "n_prompt_tokens": 5,
                "n_generated_tokens": 3,
                "finish_reason": "stop",
            }
            for k in wanted or ()
        }

    item_store.ItemStore.load = _load
