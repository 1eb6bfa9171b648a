"""The transfer section of the report: figures, tables and takeaways from its records alone.

transfer: host<->device copy bandwidth vs size against on-device copy, and the cost of non-resident data.
Imports no JAX: a report is made from result folders wherever they are read.
"""

from __future__ import annotations

from jaxgpu.records import figures, labels, palette

from experiments.contract import Seen, View


def section(seen: Seen) -> figures.Section:
    pairs = seen.drawn  # a figure draws the predicted twins beside what ran; a table reads seen.measured
    sec = figures.Section("Host-device transfer: the desk and the door", "transfer", seen.claims)
    good = labels.ok(pairs)
    series, notes, limits = [], [], []
    for label, (run, recs) in labels.by_run(good).items():
        hw = run.hardware
        if hw is not None and hw.host_gbps:  # the door: what a GPU's host link gives, each way
            limits.append(figures.Limit(f"{hw.name} PCIe to the host, each way: {hw.host_gbps:g} GB/s (datasheet)",
                                        hw.host_gbps))
        for d in ("host_to_device", "device_to_host", "on_device_copy"):
            pts = sorted((x.params["bytes"], x.metrics["gbytes_per_s"]) for x in recs if x.params.get("direction") == d)
            if pts:
                series.append(figures.Series(f"{label} {d.replace('_', ' ')}", [p[0] for p in pts], [p[1] for p in pts],
                                             style=figures.style(run), machine=palette.machine(run),
                                             variant=d.replace("_", " ")))
        if any(r is run for r, _ in seen.measured):  # a prediction has only the on-device copy: no door to compare
            notes.append(_takeaway(label, run, recs))
    if series:
        fig = figures.line_plot(series, xlabel="bytes moved", ylabel="GB/s", xunit="B", limits=limits,
                                title="copy bandwidth: across vs within device memory")
        sec.plots.append(figures.Plot("transfer", fig, " ".join(n for n in notes if n)))
    rows = [[run.label, str(x.params.get("direction", x.params.get("feed"))).replace("_", " "),
             labels.si(x.params.get("bytes", x.metrics.get("batch_bytes", 0)), "B"),
             labels.fmt(x.metrics["time_s_median"] * 1e3), labels.fmt(x.metrics.get("gbytes_per_s"))]
            for run, x in labels.ok(seen.measured)]
    sec.tables.append(figures.Table(["run", "what", "size", "median ms", "GB/s"], rows,
                               "Transfers (to and from pageable host memory: numpy's, not pinned) and MLP steps"))
    sec.paragraphs += labels.not_ok(list(seen.measured))
    return sec


def _takeaway(label, run, recs) -> str:
    big = max((x.params["bytes"] for x in recs if "bytes" in x.params), default=None)
    if big is None:
        return ""
    at = {x.params["direction"]: x.metrics["gbytes_per_s"] for x in recs if x.params.get("bytes") == big}
    text = f"{labels.opener(run)} at {labels.si(big, 'B')}"
    if "host_to_device" in at and "on_device_copy" in at:
        text += (f", host->device ran {at['host_to_device']:.1f} GB/s and device->host "
                 f"{at.get('device_to_host', float('nan')):.1f} GB/s against {at['on_device_copy']:.1f} GB/s for a "
                 "copy "
                 f"within device memory ({at['on_device_copy'] / at['host_to_device']:.1f}x)")
    steps = {x.params["feed"]: x.metrics["time_s_median"] for x in recs if x.params.get("case") == "mlp_step"}
    if {"resident", "host_fed"} <= set(steps):
        text += (f"; an MLP train step took {steps['resident'] * 1e3:.2f} ms with its batch resident and "
                 f"{steps['host_fed'] * 1e3:.2f} ms fed from the host ({steps['host_fed'] / steps['resident']:.2f}x)")
    if run.env.get("backend") == "cpu":
        text += ". On CPU host and device share one RAM, so these are copies within it, not a bus"
    return text + "."


VIEW = View(section, None)
