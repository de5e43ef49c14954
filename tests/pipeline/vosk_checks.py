"""What the vosk tests share (test_vosk, test_frame_rate, test_tdnnf, test_gmm_targets,
test_chain, test_chain_biphone): the decoded utterances and their references, the export
with dither 0, paravg's and vosk's decodes of one export (a chain model's:
:func:`decode_chain_network_both`), vosk against paravg's own decoding
(:func:`against_paravgs_decoding`), their agreement record, and WER through
:func:`paravg.decode.score.score_setting`."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import numpy as np
import torch

from paravg.decode.score import score_setting

NUM_UTTS = 10  # the first 10 test utterances (sorted ids), 10 voices, ~34 s of audio


def utterances(ws: Path, num: int | None = NUM_UTTS) -> list[str]:
    """The utterances the tests decode: the first ``num`` of the test set (all: None)."""
    lines = (ws / "results" / "data" / "test" / "wav.scp").read_text().splitlines()
    return sorted(line.split()[0] for line in lines)[:num]


def load_scp(ws: Path, scp: Path, utts: list[str]) -> dict[str, np.ndarray]:
    """The matrices of ``utts`` in ``scp``, whose arks may be named relative to ``ws``."""
    import kaldiio

    cwd = os.getcwd()
    os.chdir(ws)
    try:
        table = kaldiio.load_scp(str(scp))
        return {u: np.array(table[u]) for u in utts}
    finally:
        os.chdir(cwd)


def set_search_beams_of_paravgs_decoding(kaldi: Path) -> None:
    """The export's model.conf carries deployment beams (config ``export``: 10 / 2000);
    these tests compare vosk with paravg's own decoding, so they give vosk decode.sh's
    beam and max-active, and lattice beam 1 (see the module doc)."""
    set_decoder_option(kaldi, "beam", 15)
    set_decoder_option(kaldi, "max-active", 7000)
    set_decoder_option(kaldi, "lattice-beam", 1)


def set_decoder_option(kaldi: Path, name: str, value: float) -> None:
    """Set ``--name=value`` in the exported model.conf."""
    conf = kaldi / "conf" / "model.conf"
    text, n = re.subn(rf"--{name}=\S+", f"--{name}={value}", conf.read_text())
    assert n == 1, text
    conf.write_text(text)


def kaldi_tid2pdf(ws: Path, kaldi: Path, word_graph: bool) -> np.ndarray:
    """``tid2pdf[tid - 1]`` = pdf from Kaldi's own TransitionModel: the one the word graph
    was built with, or the demo's monophone model for a phone-loop export. Checked first
    against the exported ``final.mdl`` as paravg reads it."""
    import kaldifst  # noqa: F401  (before kaldi_hmm_gmm)

    from paravg.corpus.phones import PHONES
    from paravg.export.phone_loop import monophone_transition_model, transition_ids
    from paravg.export.transition_model import TransitionModel
    from paravg.graph.lang import read_lang
    from paravg.graph.topology import tid_to_pdf, transition_model

    if word_graph:
        lang = ws / "results" / "graph" / "words" / "lang"
        kaldi_tm = transition_model(read_lang(lang), (lang / "topo").read_text())[2]
    else:
        kaldi_tm = monophone_transition_model(len(PHONES))[0]
    expected = tid_to_pdf(kaldi_tm)[1:]
    exported = TransitionModel.from_file(kaldi / "am" / "final.mdl")
    got = np.array([pdf for row in transition_ids(exported) for _t, _d, pdf in row])
    assert np.array_equal(got, expected), "the exported transition model is not Kaldi's"
    return expected


def decode_both(
    ws, kaldi, model_path, dither0: bool, vosk_ivectors=False, word_graph=True, acoustic_scale=0.1
):
    """Hypotheses of paravg's network (FasterDecoder) and of vosk on the graph in ``kaldi``
    at ``acoustic_scale``; paravg's network gets the eval set's i-vectors, or with
    ``vosk_ivectors`` those vosk computes (from dither-0 features)."""
    from paravg.audio import AudioReader
    from paravg.data import read_data_dir
    from paravg.export.verify import paravg_loglikes, reference_decode, vosk_decode
    from paravg.features import MfccOptions, compute_mfcc
    from paravg.nnet.model_file import build_model, load_model_file

    r = ws / "results"
    utts = utterances(ws)
    model = build_model(load_model_file(model_path))
    model.eval()
    if dither0:
        data = read_data_dir(r / "data" / "test")
        reader = AudioReader(data, 16000)
        feats = {u: compute_mfcc(reader(u), MfccOptions(dither=0.0)) for u in utts}
    else:
        feats = load_scp(ws, r / "feats" / "test" / "feats.scp", utts)
    ivs = load_scp(ws, r / "ivector" / "test" / "ivector_online.scp", utts)
    period = int((r / "ivector" / "test" / "ivector_period").read_text())
    tid2pdf = kaldi_tid2pdf(ws, kaldi, word_graph)
    if vosk_ivectors:
        assert dither0, "vosk's i-vectors are computed from dither-0 features"
        from paravg.export.verify import vosk_online_ivectors
        from paravg.ivector import ubm
        from paravg.ivector.extractor import IvectorExtractor
        from paravg.ivector.features import IvectorFeaturePipeline
        from paravg.ivector.online import OnlineIvectorOptions

        files = ivector_files(r)
        system = (
            IvectorFeaturePipeline.load(files["pca"]),
            ubm.DiagGmm.load(files["ubm"]),
            IvectorExtractor.load(files["extractor"]),
            OnlineIvectorOptions(),
        )
        mfcc = MfccOptions(dither=0.0)
        ivs = {
            u: vosk_online_ivectors(model, feats[u], len(reader(u)), mfcc, *system) for u in feats
        }
        period = None
    ll = {u: paravg_loglikes(model, feats[u], ivs[u], period) for u in feats}
    graph = kaldi / "graph"
    ours = reference_decode(ll, tid2pdf, graph / "HCLG.fst", graph / "words.txt", acoustic_scale)
    set_decoder_option(kaldi, "acoustic-scale", acoustic_scale)
    set_search_beams_of_paravgs_decoding(kaldi)
    vosk = vosk_decode(kaldi, decoded_wavs(ws))
    return ours, vosk


def decoded_wavs(ws: Path, num: int | None = NUM_UTTS) -> dict[str, str]:
    """utterance -> wav file of the decoded utterances."""
    lines = (ws / "results" / "data" / "test" / "wav.scp").read_text().splitlines()
    wavs = dict(line.split(maxsplit=1) for line in lines)
    return {u: wavs[u] for u in utterances(ws, num)}


def record_agreement(ws, name, ours, vosk):
    from paravg.export.verify import agreement

    assert set(ours) == set(vosk) and len(ours) >= NUM_UTTS
    stats = agreement(ours, vosk)
    out = {"stats": stats, "paravg": ours, "vosk": vosk}
    (ws / f"vosk_{name}.json").write_text(json.dumps(out, indent=1))
    print(name, json.dumps(stats))
    return stats


def ivector_files(r):
    """The tiny pipeline's i-vector system (its last UBM and extractor iterations)."""
    iv = r / "ivector"
    return {"pca": iv / "pca.npz", "ubm": iv / "ubm.2.npz", "extractor": iv / "extractor.2.npz"}


def export_dither0(ws, model, out, word_graph=True):
    """Export ``model`` with the workspace's i-vector system and word graph (or the phone
    loop), dither 0."""
    from paravg.export.stage import export_experiment

    r = ws / "results"
    graph_dir = r / "graph" / "words" if word_graph else None
    export_experiment(model, out, {"dither": 0.0}, 16000, ivector_files(r), graph_dir=graph_dir)


def reference_text(ws: Path) -> dict[str, list[str]]:
    lines = (ws / "results" / "data" / "test" / "text").read_text().splitlines()
    return {line.split()[0]: line.split()[1:] for line in lines}


def assert_hypotheses_are_words(ws: Path, hyps: dict[str, str]) -> None:
    """Every hypothesis is a non-empty string of the graph's words; together they hold at
    least a fifth as many words as the references (measured on the tiny model, whose
    LM-driven hypotheses are short: 0.24-0.29; one word per utterance gives 0.11)."""
    words = set((ws / "results" / "graph" / "words" / "words.txt").read_text().split()[::2])
    assert all(hyps[u].split() for u in hyps), hyps
    assert all(set(hyps[u].split()) <= words for u in hyps), hyps
    ref = reference_text(ws)
    ratio = sum(len(hyps[u].split()) for u in hyps) / sum(len(ref[u]) for u in hyps)
    assert ratio >= 0.2, (ratio, hyps)


def wer_of(text: dict[str, list[str]], hyps: dict[str, str]) -> float:
    """The WER (%) of ``hyps`` against ``text``, every reference utterance decoded."""
    assert set(text) <= set(hyps), sorted(set(text) - set(hyps))
    return score_setting(text, {u: h.split() for u, h in hyps.items()})["rate"]


def without_ivector_input(workdir: Path, final: Path) -> Path:
    """``final`` (a final.pt) with the i-vector columns of its LDA-like transform zeroed,
    as ``workdir``/no_ivector_input.pt."""
    file_dict = torch.load(final, weights_only=True)
    file_dict["state_dict"]["lda_weight"][:, -file_dict["ivector_dim"] :] = 0.0
    model = workdir / "no_ivector_input.pt"
    torch.save(file_dict, model)
    return model


def assert_agreement(stats: dict, identical: float = 0.9) -> None:
    """paravg's and vosk's hypotheses (their :func:`record_agreement`) agree: at least
    ``identical`` of them the same, and at most 1 % errors between them."""
    assert stats["identical_fraction"] >= identical, stats
    assert stats["error_rate_between"] <= 1.0, stats


def decode_chain_network_both(
    ws: Path, final: Path, name: str, tid2pdf: np.ndarray
) -> tuple[dict[str, str], dict[str, str]]:
    """Hypotheses of paravg's chain network (Kaldi's FasterDecoder) and of vosk, as
    test_chain.py and test_chain_biphone.py compare them: ``final`` without its i-vector
    input, exported with dither 0 on the chain word graph at acoustic scale 1 (to
    ``ws``/kaldi_``name``), its transition model first checked against ``tid2pdf``
    (``tid2pdf[tid - 1]`` = pdf, from Kaldi's own TransitionModel of the graph's lang and
    chain tree); paravg's chain output (no priors, every third frame, the i-vector columns
    zeroed so any i-vector gives the same output) decoded at acoustic scale 1."""
    from paravg.audio import AudioReader
    from paravg.data import read_data_dir
    from paravg.export.phone_loop import transition_ids
    from paravg.export.stage import export_experiment
    from paravg.export.transition_model import TransitionModel
    from paravg.export.verify import paravg_loglikes, reference_decode, vosk_decode
    from paravg.features import MfccOptions, compute_mfcc
    from paravg.nnet.model_file import build_model, load_model_file

    r = ws / "results"
    model_path = without_ivector_input(ws, final)
    graph = r / "graph" / "chain_words"
    kaldi = ws / f"kaldi_{name}"
    export_experiment(model_path, kaldi, {"dither": 0.0}, 16000, ivector_files(r),
                      graph_dir=graph, acoustic_scale=1.0)  # fmt: skip
    exported = TransitionModel.from_file(kaldi / "am" / "final.mdl")
    got = np.array([pdf for row in transition_ids(exported) for _t, _d, pdf in row])
    assert np.array_equal(got, tid2pdf), "the exported transition model is not Kaldi's"
    model = build_model(load_model_file(model_path)).eval()
    reader = AudioReader(read_data_dir(r / "data" / "test"), 16000)
    utts = utterances(ws)
    iv = np.zeros((1, model.ivector_dim), np.float32) if model.ivector_dim else None
    feats = {u: compute_mfcc(reader(u), MfccOptions(dither=0.0)) for u in utts}
    ll = {u: paravg_loglikes(model, feats[u], iv, 10**9) for u in utts}
    ours = reference_decode(ll, tid2pdf, graph / "HCLG.fst", graph / "words.txt", 1.0)
    set_search_beams_of_paravgs_decoding(kaldi)
    return ours, vosk_decode(kaldi, decoded_wavs(ws))


def against_paravgs_decoding(
    ws: Path,
    exp: Path,
    out: Path,
    name: str,
    lattice_acoustic_scale: float = 1.0,
    every: int = 1,
) -> tuple[dict, dict[str, float], dict[str, str]]:
    """paravg's own decoding of every ``every``-th test utterance (sorted ids; 1: all) —
    ``exp``'s decode of the test set at the LMWT L scoring chose, WIP 0 — against vosk on
    the same utterances with a copy of ``exp``'s export (in ``out``/kaldi) at graph scale
    0.9 and acoustic scale 0.9 · ``lattice_acoustic_scale`` / L (the factor the lattices'
    acoustic costs carry: Kaldi's post-decode-acwt), each side with its own features and
    i-vectors. Returns the agreement (recorded as ``name``), both WERs on those
    utterances and vosk's hypotheses."""
    import shutil

    from paravg.export.verify import VOSK_GRAPH_SCALE, vosk_decode

    decode = exp / "decode" / "test"
    lmwt = float(json.loads((decode / "scores.json").read_text())["lmwt"])
    decoded = json.loads((decode / "hyps.json").read_text())["words"][f"{lmwt:g}_0"]
    utts = utterances(ws, None)[::every]
    ours = {u: decoded[u] for u in utts}
    kaldi = out / "kaldi"
    shutil.copytree(exp / "kaldi", kaldi)
    set_decoder_option(kaldi, "acoustic-scale", VOSK_GRAPH_SCALE * lattice_acoustic_scale / lmwt)
    set_search_beams_of_paravgs_decoding(kaldi)
    wavs = decoded_wavs(ws, None)
    vosk = vosk_decode(kaldi, {u: wavs[u] for u in utts})
    stats = record_agreement(ws, name, ours, vosk)
    reference = reference_text(ws)
    text = {u: reference[u] for u in utts}
    wer = {"paravg": wer_of(text, ours), "vosk": wer_of(text, vosk)}
    print("WER", json.dumps(wer))
    return stats, wer, vosk
