"""The decode split jobs' memory follows their longest utterance, and an utterance that
cannot fit is refused by name before the search (issue 34, R4).

Before, rule decode_split declared ``mem_mb=3000`` whatever it decoded, and a 10-minute
utterance took 11 GB with no word anywhere.
"""

from __future__ import annotations

import copy
import re

import pytest

from paravg.decode.split import read_num_frames, split_mem_mb, split_utterances

from .conftest import TRAINED_OVERLAY, check_ok, run_snakemake

pytestmark = pytest.mark.pipeline


def decode_mem_mb(stdout: str) -> dict[tuple[str, int], int]:
    """(experiment, split) -> mem_mb of every decode_split job a dry run plans."""
    out = {}
    for block in stdout.split("rule decode_split:")[1:]:
        wc = re.search(r"wildcards: exp=(\w+), set=test, j=(\d+)", block)
        mem = re.search(r"resources: .*\bmem_mb=(\d+)", block)
        out[(wc.group(1), int(wc.group(2)))] = int(mem.group(1))
    return out


@pytest.fixture(scope="module")
def ws(clone_trained):
    return clone_trained("decode_memory")


def test_each_splits_mem_mb_is_its_longest_utterances_estimate(ws):
    frames = read_num_frames(ws / "results/feats/test/utt2num_frames")
    for per_minute in (1000, 30_000):
        overlay = copy.deepcopy(TRAINED_OVERLAY)
        overlay["decode"] = {"mem_mb_per_minute": per_minute}
        proc = run_snakemake(ws, "--dry-run", "--forcerun", "decode_split", overlay=overlay)
        check_ok(proc, "dry run of the decode jobs")
        planned = decode_mem_mb(proc.stdout)
        expected = {(e, j): split_mem_mb(frames, 2, j, per_minute) for e in ("default", "short")
                    for j in (0, 1)}  # fmt: skip
        assert planned == expected, proc.stdout[-3000:]
        longest = [max(frames[u] for u in split_utterances(list(frames), 2, j)) for j in (0, 1)]
        assert longest[0] != longest[1]  # the two splits' figures differ with their utterances
        assert planned[("default", 0)] != planned[("default", 1)]
        # a resource, not a rerun trigger: the finished run stays finished
        proc = run_snakemake(ws, "--dry-run", overlay=overlay)
        check_ok(proc, "dry run with another rate")
        assert "Nothing to be done" in proc.stdout, proc.stdout[-3000:]


def test_a_split_that_cannot_fit_is_refused_naming_the_utterance_and_its_line(ws):
    frames = read_num_frames(ws / "results/feats/test/utt2num_frames")
    split0 = split_utterances(list(frames), 2, 0)
    longest = max(split0, key=lambda u: frames[u])
    limit = split_mem_mb(frames, 2, 0, 1000) - 1
    overlay = copy.deepcopy(TRAINED_OVERLAY)
    overlay["decode"] = {"max_mem_mb": limit}
    target = "results/exp/default/decode/test/split0.json"
    proc = run_snakemake(ws, "--cores", "1", target, "--forcerun", "decode_split", overlay=overlay)
    assert proc.returncode != 0
    line = next(
        i
        for i, text in enumerate((ws / "results/demo/test/wav.scp").read_text().splitlines(), 1)
        if text.split()[0] == longest
    )
    expected = (
        f"/results/demo/test/wav.scp:{line}: utterance {longest!r}: "  # the user's file
        f"{frames[longest] / 6000:.1f} minutes, too long to decode in "
        f"decode.max_mem_mb = {limit} MB"
    )
    assert expected in proc.stdout, proc.stdout[-3000:]
    assert "Traceback" not in proc.stdout.split(expected)[0][-2000:]
    assert not (ws / target).exists()
    assert not (ws / "results/exp/default/decode/test/lat.0.gz").exists()


def test_the_test_sets_lattices_are_the_same_pruned_on_the_way_or_once_at_the_end(ws):
    """Kaldi's final lattice does not depend on PruneActiveTokens having run: on the tiny
    trained model's test set, both graphs, the archive text pruned every 25 frames
    (whatever the links held) is the one pruned once at the end, and the pruning held
    fewer links."""
    import os

    import kaldiio
    import torch

    from paravg.decode.decoder import GraphSearch
    from paravg.decode.posteriors import utterance_log_posteriors
    from paravg.decode.search import SearchOptions, search
    from paravg.graph.load import load_graph
    from paravg.nnet.model_file import build_model, load_model_file

    cwd = os.getcwd()
    os.chdir(ws)  # the scp files name paths relative to the workspace
    try:
        fd = load_model_file("results/exp/default/final.pt")
        model = build_model(fd).eval()
        log_priors = fd["state_dict"]["log_priors"].double()
        feats = kaldiio.load_scp("results/feats/test/feats.scp")
        ivecs = kaldiio.load_scp("results/ivector/test/ivector_online.scp")
        period = int((ws / "results/ivector/test/ivector_period").read_text())
        with torch.no_grad():
            loglikes = {
                u: (utterance_log_posteriors(model, feats[u], ivecs[u], period).double()
                    - log_priors[None]).numpy()
                for u in sorted(feats)
            }  # fmt: skip
        for kind in ("words", "phones"):
            g = GraphSearch(load_graph(f"results/graph/{kind}"), SearchOptions(lattice_beam=2.0))
            held = {"once": 0, "going": 0}
            for utt, ll in loglikes.items():
                once = search(g.arrays, g.arc_pdf, ll, g.opts, prune_interval=0)
                going = search(g.arrays, g.arc_pdf, ll, g.opts, prune_interval=25, prune_above=0)
                assert going.kaldi_text(utt) == once.kaldi_text(utt), (kind, utt)
                held["once"] += once.peak_links
                held["going"] += going.peak_links
            assert held["going"] < held["once"], (kind, held)
    finally:
        os.chdir(cwd)
