"""final.mdl = TransitionModel + AmNnetSimple: round trips, the pdf check, prior floor."""

from __future__ import annotations

import numpy as np
import pytest
from export_models import random_model

from paravg.errors import ModelFileError
from paravg.export.final_mdl import (
    PRIOR_FLOOR,
    AmNnetModel,
    read_final_mdl,
    write_final_mdl,
)  # fmt: skip
from paravg.export.kaldi_stream import KaldiWriter
from paravg.export.nnet3 import nnet3_from_model
from paravg.export.phone_loop import monophone_transition_model, transition_ids
from paravg.export.transition_model import TransitionModel


@pytest.fixture(scope="module")
def tm40():
    return monophone_transition_model(40)


def test_transition_model_from_kaldi_hmm_gmm(tm40):
    khg_tm, tm = tm40
    assert tm.num_pdfs == khg_tm.num_pdfs == 40
    assert list(tm.tuples[5]) == [6, 0, 5, 5]  # phone 6 -> pdf 5
    tids = [t for row in transition_ids(tm) for t, _d, _p in row]
    assert tids == list(range(1, khg_tm.num_transition_ids + 1))
    for tid, _dst, pdf in (x for row in transition_ids(tm) for x in row):
        assert khg_tm.transition_id_to_pdf(tid) == pdf


@pytest.mark.parametrize("binary", [False, True])
def test_round_trip(tmp_path, tm40, binary):
    model = random_model()
    priors = np.linspace(0.0, 1.0, 40)
    am = AmNnetModel(tm40[1], nnet3_from_model(model), 3, 3, priors)
    path = tmp_path / "final.mdl"
    write_final_mdl(path, am, binary)
    back = read_final_mdl(path)
    assert back.transition_model.num_pdfs == 40
    np.testing.assert_array_equal(back.transition_model.tuples, tm40[1].tuples)
    np.testing.assert_allclose(back.transition_model.log_probs, tm40[1].log_probs, rtol=1e-6)
    assert back.priors[0] == pytest.approx(PRIOR_FLOOR)  # a zero prior aborts vosk
    np.testing.assert_allclose(back.priors[1:], priors[1:], rtol=1e-6)
    assert (back.left_context, back.right_context) == (3, 3)
    np.testing.assert_allclose(
        back.nnet.component("output.affine").params["linear"],
        model.output.weight.detach().numpy(),
        rtol=1e-6,
    )


def test_network_outputs_must_equal_pdfs(tmp_path):
    _khg, tm39 = monophone_transition_model(39)
    am = AmNnetModel(tm39, nnet3_from_model(random_model()), 3, 3, np.full(40, 1 / 40))
    path = tmp_path / "final.mdl"
    with pytest.raises(ModelFileError, match="40 outputs but the transition model has 39 pdfs"):
        write_final_mdl(path, am)
    assert not path.exists()


@pytest.mark.parametrize("binary", [False, True])
def test_transition_model_read_from_a_gmm_mdl(tmp_path, tm40, binary):
    """A GMM final.mdl: the TransitionModel, then the AmDiagGmm (not read)."""
    w = KaldiWriter(binary)
    tm40[1].write(w)
    w.token("<DIMENSION>")
    w.int32(13)
    path = tmp_path / "gmm.mdl"
    path.write_bytes(w.getvalue())
    tm = TransitionModel.from_file(path)
    assert tm.num_pdfs == 40 and tm.phones == list(range(1, 41))


def test_not_a_model_names_the_file(tmp_path):
    path = tmp_path / "final.mdl"
    path.write_text("hello\n")
    with pytest.raises(ModelFileError, match=str(path)):
        TransitionModel.from_file(path)
