"""A job's leased GPUs against the devices torch sees: `lease_check` takes torch's view as arguments, so
the GPU cases run here with made-up counts and UUIDs (no torch is mocked); the CPU case runs for real in
the workflow tests (tests/test_judge_workflow.py: gpu_inventory [0, 1] on this CPU machine)."""

import logging

import pytest

from genjudge.engine.devices import check_leased_devices, lease_check
from genjudge.errors import InputError


def test_no_lease_no_check():
    assert lease_check([], cuda_available=False, visible=0) is None
    assert lease_check([], cuda_available=True, visible=8) is None


def test_torch_seeing_no_cuda_runs_on_the_cpu_and_says_so():
    line = lease_check(["7"], cuda_available=False, visible=0)
    assert line.startswith("runs on the CPU despite its lease of GPU(s) 7 (CUDA_VISIBLE_DEVICES)")
    assert "check gpu_inventory" in line


def test_fewer_devices_than_leased_stops_the_job_naming_gpu_inventory():
    # gpu_inventory [0, 7] on a one-GPU machine: CUDA stops at the id it lacks, torch sees one device
    with pytest.raises(InputError, match=r"leased GPU\(s\) 0,7 .*from gpu_inventory\) but torch sees 1 of them"):
        lease_check(["0", "7"], cuda_available=True, visible=1)
    assert lease_check(["0", "1"], cuda_available=True, visible=2) is None


def test_a_leased_uuid_torch_does_not_see_stops_the_job():
    seen = ["GPU-aaaa-1111", "GPU-bbbb-2222"]
    assert lease_check(["GPU-bbbb-2222"], True, 1, seen) is None
    with pytest.raises(InputError, match=r"GPU-cccc-3333 \(gpu_inventory\) but torch sees no device with that UUID"):
        lease_check(["GPU-cccc-3333"], True, 1, seen)
    assert lease_check(["GPU-cccc-3333"], True, 1, None) is None  # UUIDs unknown: the count only


def test_this_process_check_reads_cuda_visible_devices(monkeypatch, caplog):
    import torch

    if torch.cuda.is_available():  # torch's device list is fixed at its start: the GPU cases are above
        pytest.skip("a CPU machine's check")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    with caplog.at_level(logging.WARNING):
        check_leased_devices(logging.getLogger("t"))
    assert "runs on the CPU despite its lease of GPU(s) 5" in caplog.text
