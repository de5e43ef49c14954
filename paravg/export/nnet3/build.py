"""paravg's models as nnet3 networks: the builder of each model family.

A builder turns a paravg model of its family into the nnet3 components and nodes that
kaldi-asr/kaldi's xconfig (``egs/wsj/s5/steps/libs/nnet3/xconfig/``) makes of the same
topology, parameters copied. Each family's entry of
:data:`paravg.nnet.families.FAMILIES` names its builder (``nnet3``), a function of a
``build_<family>`` module; a new family is that entry and its module.
"""

from __future__ import annotations

from paravg.errors import ModelFileError
from paravg.export.nnet3.fields import NgOptions
from paravg.export.nnet3.network import Nnet3
from paravg.nnet.families import FAMILIES


def nnet3_from_model(model, learning_rate: float = 0.0, ng: NgOptions | None = None) -> Nnet3:
    """The nnet3 network of a paravg model (parameters copied), by ``model.family``:
    :class:`paravg.nnet.tdnn.TdnnModel`, :class:`paravg.nnet.tdnnf.TdnnfModel` or
    :class:`paravg.nnet.lstm.TdnnLstmModel`."""
    family = FAMILIES.get(model.family)
    if family is None:
        raise ModelFileError(f"no nnet3 export for the model family {model.family!r}")
    return family.nnet3_builder()(model, learning_rate, ng or NgOptions())
