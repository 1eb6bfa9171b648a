import jax
import pytest

from jaxgpu.ground import devices

from tests.conftest import HOST_DEVICES


def test_append_keeps_the_users_flags():
    flags = devices.append_xla_flag("--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=2",
                                    "--xla_force_host_platform_device_count", 8)
    assert flags == "--xla_dump_to=/tmp/x --xla_force_host_platform_device_count=8"
    assert devices.append_xla_flag("", "--a", 1) == "--a=1"


def test_conftest_gave_host_devices(platform):
    assert len(jax.devices("cpu")) == HOST_DEVICES


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(devices.BackendError, match="unknown backend 'tpu'"):
        devices.configure("tpu")


def test_changing_device_count_after_start_is_refused():
    jax.devices()  # backends are up by now
    with pytest.raises(devices.BackendError, match="before any JAX computation"):
        devices.configure("cpu", HOST_DEVICES + 1)


def test_gpu_request_without_gpu_names_the_fix():
    if jax.default_backend() == "gpu":
        pytest.skip("this machine has a GPU")
    with pytest.raises(devices.BackendError, match=r"install jax\[cuda12\].*--backend cpu"):
        devices.resolve("gpu")


def test_fingerprint_has_the_contract_fields_and_no_hostname(platform):
    import socket

    env = devices.fingerprint(platform)
    for key in ("backend", "device_kind", "n_devices", "device_memory_bytes", "cpu_model", "cpu_cores", "jax",
                "jaxlib", "flax", "optax", "numpy", "python", "xla_flags", "git_commit"):
        assert key in env, key
    assert "hostname" not in env and socket.gethostname() not in [str(v) for v in env.values()]
