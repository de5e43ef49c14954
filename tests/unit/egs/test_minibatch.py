"""Kaldi's minibatch-size rules (paravg.egs.minibatch) and the loader that applies them."""

import numpy as np
import pytest
import yaml

from paravg.config import validate_config
from paravg.egs import frame_minibatches
from paravg.egs.minibatch import MinibatchRule
from paravg.egs.shuffle import buffer_shuffle_order
from paravg.errors import ConfigError
from paravg.train_job import JobSpec


def kaldi_merger(rules: list[tuple[int, list[tuple[int, int]]]], eg_size: int, n: int):
    """A literal transcription of ExampleMerger's loop (AcceptExample, then Finish) for n
    egs of one structure: returns the minibatch sizes written, in order."""
    closest = min(rules, key=lambda r: abs(eg_size - r[0]))[1]  # first on a tie
    largest = max(hi for _, hi in closest)
    written, pending = [], 0
    for _ in range(n):  # AcceptExample: write when the largest size is reached
        pending += 1
        if pending == largest:
            written.append(pending)
            pending = 0
    while pending:  # Finish: LargestValueInRange until nothing fits
        best = 0
        for lo, hi in closest:
            best = max(best, hi if pending >= hi else (pending if pending >= lo else 0))
        if best == 0:
            break
        written.append(best)
        pending -= best
    return written


CASES = [
    ("256", [(0, [(256, 256)])]),
    ("256,128", [(0, [(256, 256), (128, 128)])]),
    ("1:64", [(0, [(1, 64)])]),
    ("64,16:32", [(0, [(64, 64), (16, 32)])]),
    ("128=64/256=32", [(128, [(64, 64)]), (256, [(32, 32)])]),
    ("20=8,4/300=64", [(20, [(8, 8), (4, 4)]), (300, [(64, 64)])]),
]


@pytest.mark.parametrize(("text", "rules"), CASES)
@pytest.mark.parametrize("n", [0, 1, 37, 255, 256, 383, 1000, 1017])
@pytest.mark.parametrize("eg_size", [15, 22, 150, 200, 400])
def test_sizes_match_kaldis_merger(text, rules, n, eg_size):
    rule = MinibatchRule.parse(text)
    assert rule.sizes(eg_size, n) == kaldi_merger(rules, eg_size, n)


def test_examples_of_the_kaldi_documentation():
    assert MinibatchRule.parse("256,128").sizes(22, 1000) == [256, 256, 256, 128]  # 104 lost
    assert MinibatchRule.parse(256).sizes(22, 1000) == [256] * 3
    assert sum(MinibatchRule.parse("1:64").sizes(22, 1000)) == 1000
    two = MinibatchRule.parse("128=64/256=32")
    assert two.ranges_for(22) == ((64, 64),) and two.ranges_for(200) == ((32, 32),)


def test_halving_on_iteration_0_keeps_eg_sizes():
    assert MinibatchRule.parse("256,128").halved().text == "128,64"
    assert MinibatchRule.parse("128=64/256=32").halved().text == "128=32/256=16"
    assert MinibatchRule.parse("1:3").halved().text == "1"
    assert JobSpec(0, 0, 1e-3, "256,128", 2.0, 0, 100).effective_minibatch() == "128,64"
    assert JobSpec(1, 0, 1e-3, "256,128", 2.0, 0, 100).effective_minibatch() == "256,128"
    assert JobSpec(0, 0, 1e-3, 256, 2.0, 0, 100).effective_minibatch() == 128


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("256/128", "every rule needs its eg size"),
        ("0", "1 <= a <= b"),
        ("64:32", "1 <= a <= b"),
        ("1=2/1=3", "repeats an eg size"),
        ("x=3", "expected E=SIZES"),
    ],
)
def test_malformed_rules_are_config_errors(text, message):
    with pytest.raises(ConfigError, match=message):
        MinibatchRule.parse(text)


def _config(minibatch):
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    cfg = yaml.safe_load((root / "config" / "config.yaml").read_text())
    cfg["trainer"]["minibatch_size"] = minibatch
    return cfg


def test_config_accepts_an_integer_or_a_rule_and_rejects_others_at_start_up():
    assert validate_config(_config("256,128"))["trainer"]["minibatch_size"] == "256,128"
    assert validate_config(_config(512))["trainer"]["minibatch_size"] == 512
    with pytest.raises(ConfigError, match="minibatch_size"):
        validate_config(_config("256;128"))
    with pytest.raises(ConfigError, match=r"minibatch_size.*1 <= a <= b"):
        validate_config(_config("64:32"))


def test_loader_merges_by_the_rule_on_the_stored_eg_size(archive):
    # 37 egs, stored window 4 + 8 + 3 = 15 frames: the eg size the rule is chosen by
    rule = "15=10,4/100=2"
    batches = list(frame_minibatches(archive, 2, 1, 1, rule, buffer_size=8, seed=3))
    assert [mb.size for mb in batches] == [10, 10, 10, 4]  # 3 egs discarded
    order = buffer_shuffle_order(37, 8, 3)[:34]
    got = np.concatenate([mb.feats[:, 0, 0].numpy() for mb in batches]).astype(int)
    np.testing.assert_array_equal(got, order)
    # an integer is the rule "B": the final partial minibatch is dropped, as before
    assert [mb.size for mb in frame_minibatches(archive, 2, 1, 1, 10, 8, 3)] == [10, 10, 10]
