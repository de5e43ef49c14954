"""The exported directory: files, configs, the checks before writing, and vosk loading it
(Kaldi's own readers, text and binary) and decoding audio with it."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest
import torch

from paravg.corpus.phones import PHONES
from paravg.errors import DataError, ModelFileError
from paravg.export.final_mdl import write_final_mdl
from paravg.export.layout import IvectorSystem, export_model
from paravg.export.phone_loop import monophone_transition_model, write_phone_loop_graph
from paravg.export.verify import vosk_decode
from paravg.features import MfccOptions, num_frames
from paravg.nnet.model_file import model_to_file_dict


@pytest.fixture(scope="module")
def tm40():
    return monophone_transition_model(40)[1]


@pytest.fixture
def graph(tmp_path, tm40):
    return write_phone_loop_graph(tm40, list(PHONES[:40]), tmp_path / "graph", 2.0)


def _export(model_file, ivector_files, tm, graph, out, **kw):
    return export_model(
        model_file[0], out, tm, MfccOptions(), graph, IvectorSystem(*ivector_files), **kw
    )


def test_layout_and_configs(tmp_path, model_file, ivector_files, tm40, graph):
    out = tmp_path / "kaldi"
    summary = _export(model_file, ivector_files, tm40, graph, out)
    for name in (
        "am/final.mdl", "conf/mfcc.conf", "conf/model.conf", "conf/online.conf",
        "conf/ivector_extractor.conf", "graph/HCLG.fst", "graph/words.txt",
        "ivector/final.dubm", "ivector/final.ie", "ivector/final.mat",
        "ivector/global_cmvn.stats", "ivector/online_cmvn.conf", "ivector/splice_opts",
        "ivector/splice.conf", "export.json",
    ):  # fmt: skip
        assert (out / name).is_file(), name
    assert not (out / "am" / "global_cmvn.stats").exists()  # vosk would CMVN the net input
    model_conf = (out / "conf" / "model.conf").read_text().split()
    assert "--frame-subsampling-factor=1" in model_conf
    assert "--acoustic-scale=0.1" in model_conf
    assert any(o.startswith("--endpoint.silence-phones=") for o in model_conf)
    mfcc = (out / "conf" / "mfcc.conf").read_text().split()
    assert "--num-ceps=40" in mfcc and "--dither=1" in mfcc and "--high-freq=-400" in mfcc
    assert (out / "ivector" / "splice_opts").read_text() == "--left-context=3 --right-context=3\n"
    assert summary["num_pdfs"] == 40 and summary["format"] == "binary"
    assert (out / "am" / "final.mdl").read_bytes()[:2] == b"\0B"


def test_bad_inputs_fail_before_writing(tmp_path, model_file, ivector_files, tm40, graph):
    out = tmp_path / "kaldi"
    _khg, tm39 = monophone_transition_model(39)
    with pytest.raises(Exception, match="40 outputs but the transition model has 39 pdfs"):
        _export(model_file, ivector_files, tm39, graph, out)
    with pytest.raises(DataError, match="takes i-vectors"):
        export_model(model_file[0], out, tm40, MfccOptions(), graph, None)
    with pytest.raises(DataError, match="13 cepstra"):
        export_model(model_file[0], out, tm40, MfccOptions(num_ceps=13, num_mel_bins=23),
                     graph, IvectorSystem(*ivector_files))  # fmt: skip
    (graph / "HCLG.fst").unlink()
    with pytest.raises(DataError, match=r"no HCLG\.fst"):
        _export(model_file, ivector_files, tm40, graph, out)
    assert not out.exists()


def test_a_truncated_graph_is_caught_before_writing(
    tmp_path, model_file, ivector_files, tm40, graph
):
    """B3: an HCLG.fst cut short was copied into the export (rc 0); vosk then failed with
    "Could not read fst"."""
    hclg = graph / "HCLG.fst"
    hclg.write_bytes(hclg.read_bytes()[: hclg.stat().st_size // 2])
    out = tmp_path / "kaldi"
    with pytest.raises(DataError, match=rf"{hclg}: cannot be read as an OpenFst VectorFst"):
        _export(model_file, ivector_files, tm40, graph, out)
    assert not out.exists()


def test_graph_phones_must_be_the_models(tmp_path, model_file, ivector_files, tm40, graph):
    (graph / "phones.txt").write_text("<eps> 0\nsil 1\n")
    with pytest.raises(DataError, match=r"not in the graph's phones\.txt"):
        _export(model_file, ivector_files, tm40, graph, tmp_path / "kaldi")


def _wav(path, samples):
    with wave.open(str(path), "w") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(16000)
        f.writeframes(samples.astype("<i2").tobytes())
    return str(path)


#: 0.5 s at 16 kHz: 1 + (8000 − 400) // 160 = 48 MFCC frames (25 ms windows, 10 ms shift,
#: snip_edges), worked by hand from Kaldi's framing.
NUM_SAMPLES, NUM_FRAMES = 8000, 48


@pytest.mark.parametrize("binary", [True, False])
def test_vosk_loads_and_decodes(tmp_path, model_file, ivector_files, tm40, graph, binary):
    """Kaldi's own readers (vosk) load the export, text and binary, and decode with it.

    The phone loop has no path that consumes a frame without a phone, so audio gives at
    least one phone, and at most one per frame (one-state phones); a network that puts
    all its mass on one pdf is decoded as exactly that pdf's phone, once (a repeat costs
    another phone penalty): vosk computes with the output layer where paravg wrote it and
    maps pdf k to phone k + 1 through the exported transition model and words.txt."""
    out = tmp_path / "kaldi"
    _export(model_file, ivector_files, tm40, graph, out, binary=binary,
            decoder={"lattice_beam": 1.0})  # fmt: skip
    rng = np.random.default_rng(0)
    wav = _wav(tmp_path / "a.wav", rng.standard_normal(NUM_SAMPLES) * 3000)
    assert num_frames(NUM_SAMPLES, MfccOptions()) == NUM_FRAMES
    hyps = vosk_decode(out, {"a": wav})
    assert set(hyps) == {"a"}
    phones = hyps["a"].split()
    assert 1 <= len(phones) <= NUM_FRAMES, hyps
    assert all(w in PHONES[:40] for w in phones), hyps
    # a network sure of pdf 17 everywhere: the hypothesis is phone 18 (PHONES[17]) alone
    model = model_file[1]
    with torch.no_grad():
        model.output.weight.zero_()
        model.output.bias.zero_()
        model.output.bias[17] = 40.0
    sure = tmp_path / "sure.pt"
    torch.save(model_to_file_dict(model), sure)
    out_sure = tmp_path / "kaldi_sure"
    _export((sure, model), ivector_files, tm40, graph, out_sure, binary=binary,
            decoder={"lattice_beam": 1.0})  # fmt: skip
    assert vosk_decode(out_sure, {"a": wav}) == {"a": PHONES[17]}


def test_a_final_mdl_that_does_not_read_back_leaves_no_export(
    tmp_path, model_file, ivector_files, tm40, graph, monkeypatch
):
    """The export reads its am/final.mdl back as Kaldi does before it is complete: a writer
    that cut the file short (here, by a patched writer) is named, and no export is left
    (a reader of the export, vosk, would abort the whole process on it)."""
    import paravg.export.layout as layout

    def cut_short(path, model, binary=True):
        write_final_mdl(path, model, binary)
        Path(path).write_bytes(Path(path).read_bytes()[:-100])

    monkeypatch.setattr(layout, "write_final_mdl", cut_short)
    out = tmp_path / "kaldi"
    problem = rf"{out}/am/final\.mdl: the written final\.mdl does not read back"
    with pytest.raises(ModelFileError, match=problem):
        _export(model_file, ivector_files, tm40, graph, out)
    assert not out.exists()
