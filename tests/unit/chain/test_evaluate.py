"""A chain model on an eval set (``paravg.evaluate.evaluate_set`` → paravg/chain/evaluate.py):
the chain objective of each utterance's whole supervision, where a cross-entropy model
gets frame accuracy and cross-entropy; those are null, and the results table prints n/a."""

import numpy as np
import pytest
import torch

from paravg.egs.loader import EgsArchive
from paravg.evaluate import evaluate_set
from paravg.io import read_json, save_torch_atomic
from paravg.kaldi_io import write_ark_scp
from paravg.nnet.model_file import model_to_file_dict
from paravg.train_job import train_one_job
from tests.unit.dummies import job_spec

from .test_train import CFG, D, K, chain_model, write_chain_egs


def _eval_set(directory):
    """The first 4 training utterances' targets (write_chain_egs draws them from seed 0)
    with new feature noise, and one utterance whose phone n-grams the training phones do
    not have, so no path of the den graph."""
    rng = np.random.default_rng(0)
    sequences = []
    for _ in range(4):
        sequences.append(np.repeat(rng.integers(0, K, 14), rng.integers(4, 10, 14)))
        rng.normal(0, 0.3, (len(sequences[-1]), D))  # write_chain_egs's features
    # drawn as write_chain_egs's second utterance would be without its features: phone
    # n-grams the training utterances do not have (the den graph has no path for it)
    odd = np.random.default_rng(0)
    sequences.append([np.repeat(odd.integers(0, K, 14), odd.integers(4, 10, 14))
                      for _ in range(2)][1])  # fmt: skip
    noise = np.random.default_rng(5)
    feats, targets = {}, {}
    for u, t in enumerate(sequences):
        t = t.astype(np.int32)
        x = noise.normal(0, 0.3, (len(t), D)).astype(np.float32)
        x[np.arange(len(t)), t] += 1.0
        feats[f"e{u}"], targets[f"e{u}"] = x, t
    write_ark_scp(feats.items(), directory / "feats.ark", directory / "feats.scp")
    data = directory / "data"
    write_ark_scp(targets.items(), data / "targets.ark", data / "targets.scp")
    return directory / "feats.scp", data / "targets.scp", targets


def _evaluate(tmp_path, model, name):
    path = tmp_path / f"{name}.pt"
    save_torch_atomic(path, model_to_file_dict(model))
    feats, targets, _ = _eval_set(tmp_path)
    out = tmp_path / f"{name}.json"
    return evaluate_set(path, feats, targets, out, chain_dir=tmp_path / "chain"), out


def test_a_chain_model_is_evaluated_on_its_chain_objective(tmp_path):
    prefix = write_chain_egs(tmp_path)
    model = chain_model(seed=1)
    before, out = _evaluate(tmp_path, model, "before")
    assert read_json(out) == before
    assert before["objective"] == "chain"
    assert before["frame_accuracy"] is None and before["cross_entropy"] is None
    assert "no softmax" in before["not_scored"]
    _, _, targets = _eval_set(tmp_path)
    # every utterance is one sequence of its output frames 0, 3, 6, … (⌈n / 3⌉)
    assert before["utterances"] == 4 and not before["failed_utterances"]
    assert before["skipped_no_den_path"] == ["e4"]
    assert before["frames"] == sum(-(-len(targets[f"e{u}"]) // 3) for u in range(4))
    assert before["chain_objf"] < 0
    # training on the egs (other utterances, the same phones) raises it on the eval set
    for it in range(6):
        spec = job_spec(iteration=it + 1, minibatch_size=8, learning_rate=0.005)
        train_one_job(model, EgsArchive(prefix), spec, torch.device("cpu"))
    after, _ = _evaluate(tmp_path, model, "after")
    assert after["chain_objf"] > before["chain_objf"] + 0.2, (before, after)


def test_chain_needs_its_setup_and_phone_targets(tmp_path):
    write_chain_egs(tmp_path)
    path = tmp_path / "m.pt"
    save_torch_atomic(path, model_to_file_dict(chain_model()))
    feats, targets, _ = _eval_set(tmp_path)
    with pytest.raises(ValueError, match="chain setup"):
        evaluate_set(path, feats, targets, tmp_path / "x.json")
    assert CFG["objective"] == "chain"


def test_results_table_prints_na_and_the_chain_objective():
    from paravg.report import format_markdown, format_tsv

    rows = [
        {"experiment": "ce", "set": "test", "frame_accuracy": 0.5, "cross_entropy": 1.5,
         "frames": 10, "combined_models": 2},
        {"experiment": "chain", "set": "test", "frame_accuracy": None, "cross_entropy": None,
         "frames": 4, "combined_models": 1, "chain_objf": -0.25},
    ]  # fmt: skip
    md = format_markdown(rows).splitlines()
    assert "chain objective (per frame)" in md[0]
    assert md[2] == "| ce | test | 0.5000 | 1.5000 | 10 | 2 | n/a |"
    assert md[3] == "| chain | test | n/a | n/a | 4 | 1 | -0.2500 |"
    assert format_tsv(rows).splitlines()[0].endswith("\tchain_objf")
    # a run without chain experiments keeps its table
    assert "chain" not in format_markdown(rows[:1])


def test_a_set_without_den_paths_gets_no_chain_objective_and_says_why(tmp_path):
    """Every utterance with a phone n-gram the training phone LM lacks: the evaluation
    writes null objectives and the reason, instead of failing the run."""
    write_chain_egs(tmp_path)
    path = tmp_path / "m.pt"
    save_torch_atomic(path, model_to_file_dict(chain_model()))
    feats, targets, _ = _eval_set(tmp_path)
    one = tmp_path / "one"
    lines = [x for x in targets.read_text().splitlines() if x.startswith("e4 ")]
    (one / "data").mkdir(parents=True)
    (one / "data" / "targets.scp").write_text("\n".join(lines) + "\n")
    result = evaluate_set(path, feats, one / "data" / "targets.scp", one / "e.json",
                          chain_dir=tmp_path / "chain")  # fmt: skip
    assert result["chain_objf"] is None and result["skipped_no_den_path"] == ["e4"]
    assert "phone n-grams" in result["not_scored"] and result["utterances"] == 0
