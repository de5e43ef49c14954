"""Monophone then triphone training (train_mono.sh, train_deltas.sh, align_si.sh, scaled
down) on a tiny demo corpus: the E-step log-likelihood per frame rises over the
iterations, and the alignments' phones agree with the TTS engines' phone labels on most
frames. The figures are printed (``-s``); the bounds are mechanism-level (a broken
alignment or update agrees on well under half the frames)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from paravg.corpus import build_demo_corpus
from paravg.corpus.phones import PHONE_IDS, PHONES
from paravg.gmm.align import read_transcripts
from paravg.gmm.alignment import (
    TransitionTable,
    ali_to_phones,
    boundary_agreement,
    frame_agreement,
    read_alignments,
)
from paravg.gmm.data import gmm_mfcc, prepare_gmm_lang, read_utt2spk, split_jobs, write_dict_dir
from paravg.gmm.deltas import gmm_features
from paravg.gmm.model import GmmModel
from paravg.gmm.train_deltas import DeltasOptions, train_deltas
from paravg.gmm.train_mono import JobData, MonoOptions, align_si, train_mono
from paravg.graph.lang import base_phone, read_symbol_table
from paravg.graph.lexicon import demo_lexicon
from paravg.kaldi_io import iter_int_vectors

pytestmark = [
    pytest.mark.pipeline,
    pytest.mark.skipif(
        shutil.which("flite") is None or shutil.which("festival") is None,
        reason="flite and festival are needed for the demo corpus",
    ),
]


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """A 0.5-minute demo corpus, its dict and lang dirs, and 2 jobs of GMM features."""
    base = tmp_path_factory.mktemp("gmmdemo")
    corpus = base / "demo"
    build_demo_corpus(corpus, minutes=0.5, seed=3, num_workers=2)
    entries = demo_lexicon(corpus / "train/text", corpus / "train/phone_ctm")
    write_dict_dir(base / "dict", [(e.word, e.prob, e.phones) for e in entries], PHONES[1:])
    prepare_gmm_lang(base / "dict", base / "lang")
    utt2spk = read_utt2spk(corpus / "train/utt2spk")
    feats = gmm_features(gmm_mfcc(corpus / "train"), utt2spk)
    words = read_transcripts(base / "lang", corpus / "train/text")
    jobs = [
        JobData({u: feats[u] for u in us}, {u: words[u] for u in us})
        for us in split_jobs(utt2spk, 2)
    ]
    labels = {k: v for k, v, _ in iter_int_vectors(corpus / "train/targets.scp")}
    return base, jobs, labels


def agreement(exp, lang, labels) -> tuple[float, float]:
    """Frames whose aligned phone (position suffix dropped) is the TTS label, and TTS
    boundaries with an aligned one within 20 ms."""
    model = GmmModel.load(exp / "final.mdl")
    table = TransitionTable.of(model.trans)
    phones = read_symbol_table(lang / "phones.txt")
    to_label = np.full(max(phones.values()) + 1, -1)
    for name, i in phones.items():
        to_label[i] = PHONE_IDS.get(base_phone(name), -1)
    alis = {}
    for path in sorted(exp.glob("ali.*.ark")):
        alis.update(read_alignments(path))
    assert len(alis) == len(labels)
    per_frame = {u: ali_to_phones(table, a, per_frame=True) for u, a in alis.items()}
    return frame_agreement(per_frame, labels, to_label), boundary_agreement(
        per_frame, labels, to_label
    )


def test_mono_then_tri_training_on_the_demo(demo):
    base, jobs, labels = demo
    lang = base / "lang"
    opts = MonoOptions(
        num_iters=10, max_iter_inc=8, totgauss=300, realign_iters=[1, 2, 3, 4, 5, 6, 8]
    )
    log = train_mono(lang, jobs, base / "mono", opts)
    likes = [it["avg_like"] for it in log["iterations"]]
    assert all(not it["failed"] for it in log["iterations"][1:])
    assert likes[-1] > likes[0] + 5.0, likes  # about -115 -> -100 per frame
    align_si(GmmModel.load(base / "mono/final.mdl"), lang, jobs, base / "mono")
    mono, mono_bounds = agreement(base / "mono", lang, labels)
    print(f"mono: log-like per frame {likes[0]:.2f} -> {likes[-1]:.2f}, frames {mono:.3f}, "
          f"boundaries {mono_bounds:.3f}")  # fmt: skip
    assert mono > 0.5 and mono_bounds > 0.5

    tri_opts = DeltasOptions(
        num_leaves=200, tot_gauss=600, num_iters=8, max_iter_inc=6, realign_iters=[3, 6]
    )
    tri_log = train_deltas(lang, jobs, base / "mono", base / "tri", tri_opts)
    tri_likes = [it["avg_like"] for it in tri_log["iterations"]]
    assert tri_likes[-1] > tri_likes[0], tri_likes
    assert tri_log["num_pdfs"] > log["num_pdfs"]  # context-dependent leaves beyond the monophones'
    align_si(GmmModel.load(base / "tri/final.mdl"), lang, jobs, base / "tri")
    tri, tri_bounds = agreement(base / "tri", lang, labels)
    print(f"tri: {tri_log['num_pdfs']} pdfs, frames {tri:.3f}, boundaries {tri_bounds:.3f}")
    assert tri > 0.5 and tri_bounds > 0.5
