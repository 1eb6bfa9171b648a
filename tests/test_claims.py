import re
from pathlib import Path

from jaxgpu import claims, results

import experiments

ROOT = Path(__file__).resolve().parents[1]


def test_every_claim_has_a_rule_and_an_experiment():
    ids = [c.id for c in claims.CLAIMS]
    assert ids == [f"C{i:02d}" for i in range(1, 19)]
    for c in claims.CLAIMS:
        assert c.experiments and callable(c.rule) and c.rule_text, c.id
    shared = ROOT.parent / "shared" / "CLAIMS.md"
    if shared.exists():
        assert ids == re.findall(r"^\| (C\d\d) \|", shared.read_text(), re.M)


def test_claims_name_registered_experiments_or_say_not_built():
    known = set(experiments.names())
    for c in claims.CLAIMS:
        missing = [e for e in c.experiments if e not in known]
        if missing:
            assert c.rule([]).verdict == "not run", c.id


def test_verdicts_on_no_records_are_not_run():
    for c, v in claims.ledger([]):
        assert v.verdict == "not run", c.id


def test_verdicts_on_the_reference_run_are_computed():
    run = results.read_run(ROOT / "reports" / "cpu-reference")
    pairs = [(run, r) for r in run.records]
    verdicts = dict((c.id, v) for c, v in claims.ledger(pairs))
    assert all(v.verdict in claims.VERDICTS for v in verdicts.values())
    assert verdicts["C03"].verdict == "supported"
    assert verdicts["C09"].verdict == "contradicted"  # a memory-bound op far below peak: the cores wait
    assert verdicts["C12"].verdict == "not run" and "--backend gpu" in verdicts["C12"].evidence
