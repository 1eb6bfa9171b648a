"""Record a new published case's first price: ``python -m experiments.first_price CASE_ID ...``.

A case is priced by the model as it stands at HEAD, before anything in the model is changed because of it, and the
price is written to ``jaxgpu/pricing/first_prices.json`` with the commit that priced it. The case's own data may be
new (it is what is being added); the rest of the pricing code must be HEAD's, or the price would be the changed
model's. A case that already has a first price keeps it: a first price is never priced again.
"""

from __future__ import annotations

import json
import subprocess
import sys

from jaxgpu.pricing import fingerprint, published

from experiments import cli

COMMAND = "experiments.first_price"
# the case data itself: a new case changes it, and it is not the model
CASE_DATA = ("jaxgpu/pricing/published_cases.py",)


def changed_pricing_code() -> list[str]:
    """The pricing code's files (``fingerprint.sources``) that differ from HEAD, the case data aside."""
    files = [str(p.relative_to(fingerprint.ROOT)) for p in fingerprint.sources()]
    files = [f for f in files if f not in CASE_DATA]
    out = subprocess.run(["git", "diff", "--name-only", "HEAD", "--", *files], cwd=fingerprint.ROOT,
                         capture_output=True, text=True, check=True).stdout
    return out.split()


def head() -> str:
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=fingerprint.ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()


def record(case_ids: list[str]) -> dict[str, dict]:
    """Price each case at HEAD's model and write its first price; returns the entries written."""
    from experiments.gpu_model import measure

    prices = published.first_prices()
    at, written = head(), {}
    for case_id in case_ids:
        m = measure.price(case_id)
        written[case_id] = {"entered": f"after {at}", "priced_at": at, "first_price_s": m["predicted_s"],
                            "how": f"{at}'s model on the case as it entered, priced before any change it informed "
                                   "(experiments.first_price)"}
        case = next(c for c in published.CASES if c.id == case_id)
        if "memory_error" in m:  # a measured peak of memory: its first price too
            written[case_id]["first_memory_bytes"] = m["bytes_per_device"]
            print(f"{case_id}: {m['bytes_per_device'] / 2**30:.3g} GiB a GPU on XLA's plan, {m['memory_error']:+.1%} "
                  f"against the measured {case.peak_gib:g} GiB")
        print(f"{case_id}: {m['predicted_s']:.4g} s, {published.error(m['predicted_s'], case):+.1%} against the "
              f"published {case.published_s:.4g} s")
    prices.update(written)
    published.FIRST_PRICES.write_text(json.dumps(prices, indent=1) + "\n")
    return written


def main(argv: list[str] | None = None) -> int:
    ap = cli.Parser(prog=cli.prog(COMMAND), description=__doc__.split("\n")[0])
    ap.add_argument("cases", nargs="+", metavar="CASE_ID", help="ids of cases in jaxgpu/pricing/published_cases.py")
    args = ap.parse_args(argv)
    known, have = {c.id for c in published.CASES}, published.first_prices()
    if unknown := [c for c in args.cases if c not in known]:
        return cli.fail(cli.name(COMMAND), f"no published case {', '.join(unknown)} (add it to "
                                           "jaxgpu/pricing/published_cases.py first)")
    if priced := [c for c in args.cases if have.get(c, {}).get("first_price_s") or have.get(c, {}).get("why")]:
        return cli.fail(cli.name(COMMAND), f"{', '.join(priced)} already has a first price or says why not; a first "
                                           "price is never priced again")
    if dirty := changed_pricing_code():
        return cli.fail(cli.name(COMMAND), f"the pricing code differs from HEAD ({', '.join(dirty)}): a first price is "
                                           "the model's before any change; commit or stash the change, price, then "
                                           "change")
    record(args.cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
