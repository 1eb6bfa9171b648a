"""Pricings side by side (``jaxgpu.pricing.workers``): answers in order, cached ones here, the rest in spawned
processes, the first failure raised."""

from __future__ import annotations

import os

import pytest

from jaxgpu.pricing import workers


def _where(x: int) -> tuple[int, int]:
    """(x squared, the process that computed it); not cached unless x is even."""
    if workers.only_cached() and x % 2:
        raise workers.NotCached(x)
    return x * x, os.getpid()


def _fails(x: int) -> int:
    if x in (2, 3):
        raise ValueError(f"no {x}")
    return x


def test_calls_come_back_in_order_the_cached_here_the_rest_in_workers():
    got = workers.each(_where, [dict(x=x) for x in range(5)], workers=2)
    assert [v for v, _ in got] == [0, 1, 4, 9, 16]
    here = os.getpid()
    assert all(pid == here for (_, pid), x in zip(got, range(5)) if x % 2 == 0)
    assert all(pid != here for (_, pid), x in zip(got, range(5)) if x % 2)  # spawned, not forked from a started JAX
    assert [pid for _, pid in workers.each(_where, [dict(x=1), dict(x=3)], workers=1)] == [here, here]


def test_the_first_failure_in_order_is_raised_and_bad_counts_refused():
    with pytest.raises(ValueError, match="no 2"):
        workers.each(_fails, [dict(x=x) for x in range(5)])
    with pytest.raises(ValueError, match="at least 1"):
        workers.each(_fails, [dict(x=1)], workers=0)
    assert not workers.only_cached()  # the probe's scope ends with it


def test_a_model_priced_by_workers_is_the_model_priced_here():
    from jaxgpu.ground.decoders import Decoder
    from jaxgpu.pricing import planner, targets

    if why := targets.unavailable():
        pytest.skip(why)
    c = Decoder("described", 2, 256, 8, 2, 512, 1000, 2048, "llama")
    here = planner.model_on_gpus(c, batch=4, seq=128, devices=(1, 2), gpus=("h100",), workers=1)
    apart = planner.model_on_gpus(c, batch=4, seq=128, devices=(1, 2), gpus=("h100",), workers=2)
    assert apart == here and [p.devices for p in here] == [1, 2]


def test_the_default_workers_are_the_cores_as_far_as_the_memory_holds_them(tmp_path, monkeypatch):
    monkeypatch.setattr(workers, "cores", lambda: 16)
    meminfo = tmp_path / "meminfo"
    meminfo.write_text(f"MemTotal: 32000000 kB\nMemAvailable: {int(3.5 * workers.WORKER_BYTES / 1024)} kB\n")
    assert workers.default_workers(str(meminfo)) == 3
    meminfo.write_text("MemAvailable: 100 kB\n")
    assert workers.default_workers(str(meminfo)) == 1
    assert workers.default_workers(str(tmp_path / "none")) == 16
