"""The rule contracts (paravg.contracts): each kind of planned rule gets one typed object
from the plan, whose params keep the shape the rules have always had (Snakemake's params
are rerun triggers: a new shape would rerun every finished job) and read back equal."""

import yaml

from paravg.config import REPO_CONFIG, deep_merge, validate_config
from paravg.contracts import JobRule, MixRule, NodeRule
from paravg.plan import experiment_plans
from tests.unit.test_resume import INFO


def plan(tmp_path, method):
    cfg = deep_merge(
        yaml.safe_load(REPO_CONFIG.read_text()),
        {"results": str(tmp_path / "results"), "sync": {"method": method},
         "trainer": {"num_jobs_initial": 3, "num_jobs_final": 3}},
    )  # fmt: skip
    return experiment_plans(validate_config(cfg), INFO)["default"]


def test_job_and_node_rules_read_back_from_their_params(tmp_path):
    p = plan(tmp_path, "bmuf")
    job = p.job_rule(3, 1)
    assert isinstance(job, JobRule) and JobRule.from_params(job.params()) == job
    assert list(job.params()) == [
        "job", "files", "fingerprint", "egs", "egs_info", "inputs_fingerprint", "sync", "method",
    ]  # fmt: skip
    assert job.fingerprint == p.fingerprint(4) and job.method == "bmuf"
    node = p.node_rule(4)
    assert isinstance(node, NodeRule) and NodeRule.from_params(node.params()) == node
    assert list(node.params()) == ["iteration", "sync", "files", "fingerprint"]
    # a sync node's inputs carry the fingerprint of the index it writes
    assert node.inputs_fingerprint == node.fingerprint == p.fingerprint(4)


def test_the_mix_rule_keeps_its_fingerprints_pair(tmp_path):
    p = plan(tmp_path, "delay-by-one")
    mix = p.mix_rule(4, 2)
    params = mix.params()
    assert list(params) == ["iteration", "files", "sync", "fingerprints"]
    assert params["fingerprints"] == {"own": p.fingerprint(4), "inputs": p.fingerprint(2)}
    assert MixRule.from_params(params) == mix
