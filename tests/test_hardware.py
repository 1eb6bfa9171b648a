import pytest

from jaxgpu.ground import hardware


def test_cpu_estimate_formula():
    hw = hardware.cpu_estimate(cores=2, clock_ghz=2.5, flags={"avx512f", "avx2"})
    assert hw.estimate
    assert hw.peak_flops("fp32") == pytest.approx(2 * 2.5e9 * 16 * 2 * 2)
    assert hw.peak_flops("fp64") == pytest.approx(hw.peak_flops("fp32") / 2)
    assert hardware.cpu_estimate(cores=4, clock_ghz=3.0, flags={"avx2"}).peak_flops("fp32") == pytest.approx(
        4 * 3e9 * 8 * 2 * 2)
    vnni = hardware.cpu_estimate(cores=1, clock_ghz=1.0, flags={"avx512f", "avx512_vnni"})
    assert vnni.peak_flops("int8") == pytest.approx(4 * vnni.peak_flops("fp32"))
    assert "estimate" in hw.source


def test_this_machine_has_an_estimate():
    hw = hardware.cpu_estimate()
    assert hw.cores >= 1 and hw.peak_flops("fp32") > 1e9


@pytest.mark.parametrize("kind,name", [("NVIDIA H200", "H200 SXM"), ("NVIDIA H200 NVL", "H200 NVL"),
                                       ("NVIDIA H100 80GB HBM3", "H100 SXM"),
                                       ("NVIDIA A100-SXM4-80GB", "A100 80GB"), ("NVIDIA L4", "L4"),
                                       ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA B200", "B200"),
                                       ("NVIDIA H100 PCIe", "H100 PCIe"), ("NVIDIA H100 NVL", "H100 NVL"),
                                       ("NVIDIA L40S", "L40S"), ("NVIDIA A100-SXM4-40GB", "A100 40GB")])
def test_gpu_kinds_map_to_the_table(kind, name):
    assert hardware.gpu_spec(kind).name == name


def test_table_is_complete_and_consistent():
    for name in hardware.GPUS:
        hw = hardware.GPUS[name]
        assert set(hw.tflops) == set(hardware.DTYPES)
        assert hw.memory_gb > 0 and hw.memory_bw_gbps > 0 and hw.cores > 0 and hw.source
        assert hw.tflops["bf16"] >= hw.tflops["tf32"] >= hw.tflops["fp32"]
    assert hardware.gpu_spec("Some Other GPU") is None


def test_each_card_is_one_entry_that_names_how_it_is_planned_and_found():
    """A card's entry says everything the package needs of it: a compile target of its own (whose device kind finds
    the card again) or a stand-in card that has one; its name, aliases and target's name find it; the lent cards
    and the report's cards are among them; one processor, one colour."""
    colours: dict[str, set[str]] = {}
    for name, hw in hardware.GPUS.items():
        assert hw.name == name and hw.kinds and (hw.compiled is None) != (hw.stand_in is None), name
        if hw.compiled:
            c = hw.compiled
            assert hardware.gpu_spec(c.device_kind) is hw and hardware.find_gpu(c.name) is hw, name
            assert c.memory_mib * 2**20 > 0.9 * hw.memory_gb * 1e9 and c.source and c.compute_capability >= (8, 0)
        else:
            assert hardware.GPUS[hw.stand_in].compiled is not None, name
        assert all(hardware.find_gpu(n) is hw for n in (name, *hw.aliases)), name
        if hw.colour:
            colours.setdefault(hw.colour, set()).add(name.split()[0])
    assert all(len(families) == 1 for families in colours.values()), colours
    assert hardware.DEFAULT_GPU in hardware.GPUS and any(hw.lent for hw in hardware.GPUS.values())
    assert hardware.GPUS[hardware.DEFAULT_GPU].in_report


def test_a_card_comes_back_whole_from_run_json():
    import dataclasses
    import json

    for hw in hardware.GPUS.values():
        assert hardware.Hardware.from_dict(json.loads(json.dumps(dataclasses.asdict(hw)))) == hw, hw.name


def test_the_devices_record_shows_the_memory_not_the_allocator_limit():
    from experiments.devices import measure as exp

    h200 = hardware.GPUS["H200 SXM"]
    m = exp.describe(h200, 1, allocator_bytes=int(0.75 * 141e9))  # the GPU client's default 75%
    assert m["memory_gb"] == 141 and m["allocator_limit_gb"] == pytest.approx(105.75)
    assert "allocator_limit_gb" not in exp.describe(hardware.cpu_estimate(), 1)


def test_ridge_point_follows_from_the_table():
    h200 = hardware.GPUS["H200 SXM"]
    assert h200.ridge_point("bf16") == pytest.approx(989.4e12 / 4.8e12)
    assert hardware.cpu_estimate().ridge_point() is None  # no bandwidth figure to divide by
