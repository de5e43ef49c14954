"""paravg's models as nnet3 networks: the builder of each model family.

A builder turns a paravg model of its family into the nnet3 components and nodes that
kaldi-asr/kaldi's xconfig (``egs/wsj/s5/steps/libs/nnet3/xconfig/``) makes of the same
topology, parameters copied. A new family is one entry of :data:`BUILDERS` and its
``build_<family>`` module.
"""

from __future__ import annotations

from paravg.errors import ModelFileError
from paravg.export.nnet3.build_tdnn import tdnn_nnet3
from paravg.export.nnet3.build_tdnn_lstm import tdnn_lstm_nnet3
from paravg.export.nnet3.build_tdnnf import tdnnf_nnet3
from paravg.export.nnet3.fields import NgOptions
from paravg.export.nnet3.network import Nnet3

BUILDERS = {"tdnn": tdnn_nnet3, "tdnnf": tdnnf_nnet3, "tdnn_lstm": tdnn_lstm_nnet3}


def nnet3_from_model(model, learning_rate: float = 0.0, ng: NgOptions | None = None) -> Nnet3:
    """The nnet3 network of a paravg model (parameters copied), by ``model.family``:
    :class:`paravg.nnet.tdnn.TdnnModel`, :class:`paravg.nnet.tdnnf.TdnnfModel` or
    :class:`paravg.nnet.lstm.TdnnLstmModel`."""
    family = getattr(model, "family", "tdnn")
    builder = BUILDERS.get(family)
    if builder is None:
        raise ModelFileError(f"no nnet3 export for the model family {family!r}")
    return builder(model, learning_rate, ng or NgOptions())
