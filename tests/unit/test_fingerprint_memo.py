"""The fingerprint chain's memo on disk (paravg.fingerprint_memo): a process that finds it
reads the chain instead of planning every job of the run, and gets the same digests."""

import json
import os

from paravg import fingerprint_memo
from paravg.plan import ExperimentPlan
from tests.unit.fabricated_run import plan_in

RAMP = {"trainer": {"num_jobs_initial": 3, "num_jobs_final": 4}}


def memoised(tmp_path, overrides=RAMP, cls=None):
    memo = str(tmp_path / "memo")
    p = plan_in(tmp_path, overrides, fingerprint_dir=memo)
    if cls is not None:
        p = cls(p.name, p.experiment, p.egs, p.layout, p.combine, fingerprint_dir=memo)
    return p


def counting(p):
    """Count the job params the plan computes (the O(T · N) work of the chain)."""
    calls = []
    real = p.job_params
    p.job_params = lambda t, j: calls.append((t, j)) or real(t, j)
    return calls


def test_the_memo_is_the_computed_chain_and_spares_planning_the_run(tmp_path):
    plain = plan_in(tmp_path, RAMP)
    n = plain.num_iters
    chain = [plain.fingerprint(i) for i in range(n + 1)]
    first = memoised(tmp_path)
    assert first.fingerprint(n) == chain[n]  # computed here, and written
    (memo,) = os.listdir(tmp_path / "memo")
    assert json.loads((tmp_path / "memo" / memo).read_text()) == chain
    # a later process (a cluster job) reads it: each link it asks for costs one
    # iteration's jobs (checked against the plan), not the T · N of the chain
    job = memoised(tmp_path)
    calls = counting(job)
    t = n - 3
    assert (job.fingerprint(t + 1), job.fingerprint(t)) == (chain[t + 1], chain[t])
    assert sorted({i for i, _ in calls}) == [t - 1, t]
    assert len(calls) == job.num_jobs(t - 1) + job.num_jobs(t)
    assert job.fingerprint(t) == chain[t] and len(calls) == job.num_jobs(t - 1) + job.num_jobs(t)
    assert [job.fingerprint(i) for i in range(n + 1)] == chain


def test_a_memo_that_disagrees_with_the_plan_is_recomputed(tmp_path):
    chain = [memoised(tmp_path).fingerprint(i) for i in range(5)]
    (memo,) = (tmp_path / "memo").iterdir()
    stored = json.loads(memo.read_text())
    stored[4] = stored[3]  # a damaged or foreign memo: link 4 does not follow from link 3
    memo.write_text(json.dumps(stored))
    p = memoised(tmp_path)
    assert p.fingerprint(4) == chain[4]
    assert json.loads(memo.read_text())[4] == chain[4]  # rewritten
    # a memo of the wrong length or not JSON is no memo
    for text in ("[]", "{", json.dumps(stored[:-1])):
        memo.write_text(text)
        assert memoised(tmp_path).fingerprint(4) == chain[4]


def test_the_key_follows_config_code_and_class_and_one_memo_per_experiment_stays(
    tmp_path, monkeypatch
):
    p = memoised(tmp_path)
    key = p._chain_key()
    assert memoised(tmp_path)._chain_key() == key  # the same settings, another process
    assert memoised(tmp_path, {**RAMP, "sync": {"method": "bmuf"}})._chain_key() != key

    class Replanned(ExperimentPlan):
        pass

    assert memoised(tmp_path, cls=Replanned)._chain_key() != key
    monkeypatch.setattr(fingerprint_memo, "source_digest", lambda: "edited code")
    assert memoised(tmp_path)._chain_key() != key
    monkeypatch.undo()

    memo = tmp_path / "memo"
    memo.mkdir()
    (memo / "default.v2.0123abcd.json").write_text("[]")  # experiment "default.v2"
    (memo / "default.0123abcd.json").write_text("[]")  # "default", an older key
    p.fingerprint(1)
    assert sorted(os.listdir(memo)) == sorted(["default.v2.0123abcd.json", f"default.{key}.json"])


def test_without_a_directory_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    p = plan_in(tmp_path, RAMP)
    assert p.fingerprint_dir is None
    p.fingerprint(p.num_iters)
    assert sorted(os.listdir(tmp_path)) == []


def test_an_unwritable_directory_only_costs_the_recomputation(tmp_path):
    blocker = tmp_path / "memo"
    blocker.write_text("a file where the directory should be")
    p = memoised(tmp_path)
    assert p.fingerprint(3) == plan_in(tmp_path, RAMP).fingerprint(3)
