"""The second half of the 500 studies summary.json is checked on against the reference computation
(tests/reference.py; the first half and the example configs are in test_reference_computation.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from reference_studies import check_study, studies, studies_per_module

STUDIES = studies_per_module()  # 250


@settings(
    max_examples=STUDIES,
    deadline=None,
    derandomize=True,  # the same studies every run (others than the first half's: the seed is this test's)
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(studies())
def test_summary_json_agrees_with_the_reference_computation_on_more_studies(study):
    with tempfile.TemporaryDirectory() as tmp:
        check_study(study, Path(tmp))
