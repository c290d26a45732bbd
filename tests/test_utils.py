"""attnmt.utils: atomic writes keep the old file on failure and give the new one ordinary permissions;
the device choice; the machine description."""

import os

import pytest
import torch

from attnmt.utils import UserError, atomic_path, choose_device, describe_machine, shared_machine, write_text_atomic


def test_an_atomic_write_gets_the_permissions_of_any_new_file(tmp_path):
    ordinary = tmp_path / "ordinary.txt"
    ordinary.write_text("x")
    written = tmp_path / "atomic.txt"
    write_text_atomic(written, "y")
    assert written.read_text() == "y"
    assert written.stat().st_mode & 0o777 == ordinary.stat().st_mode & 0o777


def test_a_failed_atomic_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "results.md"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["results.md"]


@pytest.mark.parametrize(
    ("cuda", "mps", "auto_mps", "expected"),
    [
        (True, True, True, "cuda"),
        (False, True, True, "mps"),
        (False, True, False, "cpu"),  # MPS only when named
        (False, False, True, "cpu"),
    ],
)
def test_auto_picks_cuda_then_mps_then_cpu(monkeypatch, cuda, mps, auto_mps, expected):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    assert choose_device("auto", auto_mps=auto_mps) == expected
    if mps:
        assert choose_device("mps", auto_mps=auto_mps) == "mps", "named, it is used"


def test_an_absent_device_names_the_setting_it_came_from(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(UserError, match="'cuda:1' was requested but is not available") as raised:
        choose_device("cuda:1", field="device")
    assert raised.value.field == "device"
    with pytest.raises(UserError, match="unknown device 'tpu'"):
        choose_device("tpu")


def test_the_machine_description_names_the_cpu_kernels_vector_instructions():
    machine = describe_machine()
    assert machine["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and machine["cpu"]


def test_runs_on_machines_that_differ_keep_each_difference_in_their_shared_machine():
    intel = {"cpu": "Intel(R) Xeon(R) Processor", "cores": 2, "platform": "Linux-a"}
    assert shared_machine([intel, dict(intel)]) == intel
    amd = intel | {"cpu": "AMD EPYC 9B14", "platform": "Linux-b"}
    machine = shared_machine([intel, amd, intel])
    assert machine == {"cpu": [intel["cpu"], amd["cpu"]], "cores": 2, "platform": ["Linux-a", "Linux-b"]}
    assert shared_machine([]) is None
