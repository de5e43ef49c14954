"""The whole egs stage (plan, split jobs, archives, subsets) on a tiny synthetic set."""

import hashlib

import numpy as np
from egs_synth import build_egs, default_lengths, make_data

from paravg.egs import EgsArchive, all_frame_minibatches
from paravg.egs.plan import read_uttlist


def archive_keys(out, info):
    return [k for a in range(info.num_archives) for k in EgsArchive(out / f"egs.{a}").read_keys()]


def test_archives_hold_every_training_eg_once_and_no_valid_utterance(synth, tmp_path):
    out = tmp_path / "egs"
    info = build_egs(synth, out)["info"]
    assert info.num_archives >= 3
    keys = archive_keys(out, info)
    assert len(keys) == len(set(keys)) == info.num_train_egs
    utts = {k.rsplit("-", 1)[0] for k in keys}
    valid = {u for u, _ in read_uttlist(out / "lists" / "valid")}
    subset = {u for u, _ in read_uttlist(out / "lists" / "train_subset")}
    assert valid and not utts & valid
    assert subset <= utts  # train-subset utterances stay in training
    sizes = [EgsArchive(out / f"egs.{a}").num_egs for a in range(info.num_archives)]
    assert min(sizes) > 0


def test_archive_contents_match_the_source_utterances(synth, tmp_path):
    out = tmp_path / "egs"
    info = build_egs(synth, out)["info"]
    utts = sorted(synth.lengths)
    arch = EgsArchive(out / "egs.1")
    feats = np.asarray(arch.feats, dtype=np.float32)
    for i, key in enumerate(arch.read_keys()):
        utt, first = key.rsplit("-", 1)
        src = synth.feats(utt)
        rows = np.clip(int(first) - info.left_context + np.arange(info.window), 0, len(src) - 1)
        assert np.allclose(feats[i], src[rows].astype(np.float16))
        assert feats[i, 0, 1] == utts.index(utt)
        k = utts.index(utt)
        assert arch.labels[i].tolist() == [(int(first) + t + k) % 7 for t in range(8)]


def test_subsets_come_from_heldout_and_train_subset_utterances(synth, tmp_path):
    out = tmp_path / "egs"
    build_egs(synth, out)
    valid = {u for u, _ in read_uttlist(out / "lists" / "valid")}
    subset = {u for u, _ in read_uttlist(out / "lists" / "train_subset")}
    for name, pool, wanted in [
        ("valid_diag", valid, 10),
        ("train_diag", subset, 10),
        ("combine", subset, 20),
    ]:
        arch = EgsArchive(out / name)
        keys = arch.read_keys()
        assert {k.rsplit("-", 1)[0] for k in keys} <= pool
        assert len(keys) == len(set(keys)) and 0 < len(keys) <= wanted
        n = sum(mb.size for mb in all_frame_minibatches(arch, 3, 2, 64))
        assert n == len(keys)


def test_deterministic_bytes_across_runs(tmp_path):
    data = make_data(tmp_path / "data", default_lengths(30, seed=5), ivectors=True)
    digests = []
    for run in ("a", "b"):
        out = tmp_path / run
        build_egs(data, out)
        files = sorted(p for p in out.rglob("*") if p.is_file())
        digests.append(
            {p.relative_to(out): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
        )
    assert digests[0] == digests[1]
    assert any(str(p).endswith("ivectors.npy") for p in digests[0])
    build_egs(data, tmp_path / "c", srand=1)
    other = hashlib.sha256((tmp_path / "c" / "egs.0.feats.npy").read_bytes()).hexdigest()
    assert other != digests[0][next(p for p in digests[0] if str(p) == "egs.0.feats.npy")]


def test_ivectors_follow_the_row_rule(tmp_path):
    lengths = default_lengths(20, seed=2)
    data = make_data(tmp_path / "data", lengths, ivectors=True)
    out = tmp_path / "egs"
    info = build_egs(data, out)["info"]
    assert info.ivector_dim == 3 and info.ivector_period == 10
    utts = sorted(lengths)
    arch = EgsArchive(out / "egs.0")
    for i, key in enumerate(arch.read_keys()):
        utt, first = key.rsplit("-", 1)
        row = int(arch.ivectors[i, 0])
        assert arch.ivectors[i, 1] == utts.index(utt)
        # r in [first - lc, first - lc + T - 1], row = clamp(r // 10)
        lo = max(0, (int(first) - info.left_context) // 10)
        hi = min(
            -(-lengths[utt] // 10) - 1, (int(first) - info.left_context + lengths[utt] - 1) // 10
        )
        assert lo <= row <= hi


def test_egs_do_not_depend_on_the_number_of_split_jobs(synth, tmp_path):
    """Chunks are seeded per utterance: nj changes only which archive an eg lands in."""
    egs = {}
    for nj in (1, 3):
        out = tmp_path / f"nj{nj}"
        info = build_egs(synth, out, nj=nj)["info"]
        egs[nj] = {}
        for a in range(info.num_archives):
            arch = EgsArchive(out / f"egs.{a}")
            for i, key in enumerate(arch.read_keys()):
                egs[nj][key] = (arch.feats[i].tobytes(), arch.labels[i].tobytes())
    assert egs[1] == egs[3]
