"""What the GPUs are, read through NVML (specgate/hardware.py), with a stand-in `pynvml`: the
CPU machine that runs these has no driver library, so the real one answers "no GPU" (checked too)."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from specgate import hardware as gpu  # "gpu." reads as what it asks
from specgate.errors import GpuQueryFailed, SpecgateError


class _NvmlError(Exception):
    pass


def fake_nvml(devices: list[dict], *, init_error: str = "", fail: str = "") -> types.ModuleType:
    """A pynvml with `devices` (name, uuid, total/used bytes, pids); `fail` names a call that raises."""
    m = types.ModuleType("pynvml")
    m.NVMLError = _NvmlError
    m.NVMLError_LibraryNotFound = type("NVMLError_LibraryNotFound", (_NvmlError,), {})
    m.NVMLError_DriverNotLoaded = type("NVMLError_DriverNotLoaded", (_NvmlError,), {})
    m.NVMLError_NotSupported = type("NVMLError_NotSupported", (_NvmlError,), {})
    m.NVMLError_Unknown = type("NVMLError_Unknown", (_NvmlError,), {})
    m.NVMLError_NoPermission = type("NVMLError_NoPermission", (_NvmlError,), {})
    m.NVMLError_FunctionNotFound = type("NVMLError_FunctionNotFound", (_NvmlError,), {})
    m.calls = {"init": 0, "shutdown": 0}

    def call(name, value):
        def f(*args):
            if fail == name:
                raise m.NVMLError_Unknown("Unknown Error")
            return value(*args)

        return f

    def init():
        if init_error:
            raise getattr(m, init_error)("init failed")
        m.calls["init"] += 1

    def shutdown():
        m.calls["shutdown"] += 1

    def processes(i):
        if isinstance(devices[i]["pids"], str):  # the NVML error this device answers with
            raise getattr(m, devices[i]["pids"])("cannot list")
        return [SimpleNamespace(pid=p, usedGpuMemory=1) for p in devices[i]["pids"]]

    m.nvmlInit, m.nvmlShutdown = init, shutdown
    m.nvmlDeviceGetCount = call("count", lambda: len(devices))
    m.nvmlDeviceGetHandleByIndex = call("handle", lambda i: i)
    m.nvmlDeviceGetName = call("name", lambda i: devices[i]["name"])
    m.nvmlDeviceGetUUID = call("uuid", lambda i: devices[i]["uuid"])
    m.nvmlSystemGetDriverVersion = call("driver", lambda: "580.159.04")
    m.nvmlSystemGetCudaDriverVersion = call("cuda", lambda: 13000)
    m.nvmlDeviceGetMemoryInfo = call(
        "memory", lambda i: SimpleNamespace(total=devices[i]["total"], used=devices[i]["used"], free=0)
    )
    m.nvmlDeviceGetComputeRunningProcesses = call("processes", processes)
    return m


H200 = {"name": "NVIDIA H200", "uuid": "GPU-290761d7-8339-9437-2948-2e073192c37c", "total": 143771 << 20,
        "used": 600 << 20, "pids": [4242]}  # fmt: skip


@pytest.fixture
def use_nvml(monkeypatch):
    def install(module):
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    return install


def test_the_gpus_are_named_as_the_stored_fingerprints_name_them(use_nvml):
    """Name, count, driver and the CUDA version in nvidia-smi's form ("13.0"), which every stored
    baseline's fingerprint holds: another form would make them all NOT COMPARED."""
    nvml = use_nvml(fake_nvml([H200, {**H200, "uuid": "GPU-second", "pids": [], "used": 1 << 20}]))
    assert gpu.gpu_info() == gpu.GpuInfo("NVIDIA H200", 2, "580.159.04", "13.0", 143771)
    assert gpu.gpu_uuids() == ["GPU-290761d7-8339-9437-2948-2e073192c37c", "GPU-second"]
    assert gpu.memory_used_mib() == 601
    assert gpu.pids_holding_gpu_memory() == {4242}
    assert nvml.calls["init"] == nvml.calls["shutdown"] == 4  # every query hands NVML back
    assert gpu._cuda_version(12080) == "12.8" and gpu._cuda_version(11020) == "11.2"


def test_no_driver_library_is_no_gpu_and_a_failing_one_is_not(use_nvml):
    for missing in ("NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"):
        use_nvml(fake_nvml([H200], init_error=missing))
        assert gpu.gpu_info() is None and gpu.pids_holding_gpu_memory() is None
        assert gpu.wait_gpu_released({1}, timeout_s=5, idle_used_mib=None) is None  # nothing to wait for
    use_nvml(fake_nvml([H200], init_error="NVMLError_Unknown"))
    assert gpu.gpu_info() is None  # a description can do without it
    with pytest.raises(GpuQueryFailed, match="NVML did not start"):
        gpu.pids_holding_gpu_memory()  # a wait for released memory cannot
    use_nvml(fake_nvml([H200], fail="processes"))
    with pytest.raises(GpuQueryFailed, match="NVML: Unknown Error"):
        gpu.pids_holding_gpu_memory()  # a GPU that does not answer confirms nothing
    assert gpu.wait_gpu_released({4242}, timeout_s=0, idle_used_mib=None).startswith("cannot confirm")
    assert gpu.gpu_info() is not None  # the rest of the driver still answers
    use_nvml(fake_nvml([]))
    assert gpu.gpu_info() is None and gpu.gpu_uuids() == []


@pytest.mark.parametrize("answer", ["NVMLError_NotSupported", "NVMLError_NoPermission", "NVMLError_FunctionNotFound"])
def test_a_device_that_cannot_list_processes_leaves_it_to_the_memory_signal(use_nvml, answer):
    """Containers (NotSupported), a MIG GPU asked as a whole without privilege (NoPermission), a
    driver older than the bindings' call (FunctionNotFound): nvidia-smi listed nothing there; a
    failure here would refuse every later boot of a deployment whose servers take turns."""
    nvml = use_nvml(fake_nvml([{**H200, "pids": answer}, {**H200, "pids": [77]}]))
    assert gpu.pids_holding_gpu_memory() == {77}
    nvml = use_nvml(fake_nvml([{**H200, "pids": answer}]))
    assert gpu.pids_holding_gpu_memory() == set()
    assert gpu.wait_gpu_released({4242}, timeout_s=0, idle_used_mib=600) is None  # 600 MiB, as before the boot
    assert "in use against 10 MiB" in gpu.wait_gpu_released({4242}, timeout_s=0, idle_used_mib=10)
    assert nvml.calls["init"] == nvml.calls["shutdown"]


def test_older_bindings_that_answer_bytes_name_the_gpu_the_same(use_nvml):
    """nvidia-ml-py before 11.515 returns bytes: str() of them would read "b'NVIDIA H200'"."""
    old = fake_nvml([{**H200, "name": b"NVIDIA H200", "uuid": b"GPU-290761d7"}])
    old.nvmlSystemGetDriverVersion = lambda: b"580.159.04"
    use_nvml(old)
    assert gpu.gpu_info() == gpu.GpuInfo("NVIDIA H200", 1, "580.159.04", "13.0", 143771)
    assert gpu.gpu_uuids() == ["GPU-290761d7"]


def test_held_memory_is_waited_for_and_named_when_it_stays(use_nvml):
    use_nvml(fake_nvml([H200]))
    left = gpu.wait_gpu_released({4242, 7}, timeout_s=0, idle_used_mib=None)
    assert left == "processes [4242] still listed"


def test_a_gpu_host_without_nvml_bindings_says_so_instead_of_no_gpu(monkeypatch):
    """Saying "no GPU" on a GPU host would file its figures under the wrong fingerprint."""
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    monkeypatch.setattr(gpu.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    with pytest.raises(SpecgateError, match="nvidia-ml-py \\(pynvml\\) is not importable"):
        gpu.gpu_info()
    monkeypatch.setattr(gpu.shutil, "which", lambda name: None)
    assert gpu.gpu_info() is None


def test_this_cpu_machine_has_no_gpu_through_the_real_bindings():
    import pynvml  # a dependency: installed with specgate

    assert pynvml.NVMLError_LibraryNotFound  # the names _query catches exist in the real module
    assert pynvml.NVMLError_DriverNotLoaded and pynvml.NVMLError_NotSupported
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        assert gpu.gpu_info() is None
    else:  # pragma: no cover - a GPU machine runs this too
        pynvml.nvmlShutdown()
        assert gpu.gpu_info() is not None


def test_a_simulator_run_never_asks_the_hosts_gpus(monkeypatch, tmp_path):
    """The simulator's fingerprint is 'none (simulator)' whatever the host has: a host whose GPU
    cannot be read (no bindings, a failing driver) still runs the simulator, as before NVML."""
    from helpers import FAST, merge, sim_deployment_dict

    from specgate.deployment import parse_deployment
    from specgate.provenance import host_id
    from specgate.verdicts import fingerprint

    def unreadable():
        raise SpecgateError("nvidia-smi is on this host but nvidia-ml-py (pynvml) is not importable")

    monkeypatch.setattr(fingerprint, "gpu_info", unreadable)
    monkeypatch.setattr(gpu, "gpu_uuids", unreadable)
    dep = parse_deployment(merge(sim_deployment_dict(), FAST), tmp_path / "dep.toml")
    fp = fingerprint.collect_fingerprint(dep, {"version": "sim"}, {})
    assert (fp.gpu, fp.gpu_count, fp.driver, fp.cuda) == ("none (simulator)", 0, "none", "none")
    assert host_id()  # falls back to the machine's id
