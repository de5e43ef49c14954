"""paravg's networks as Kaldi nnet3 networks: build, write, read back, and run.

- :mod:`.build` (and ``build_tdnn``, ``build_tdnnf``, ``build_tdnn_lstm``,
  ``build_parts``): a paravg model of each family → an :class:`Nnet3`;
- :mod:`.network`: :class:`Nnet3`, its node graph, ``Nnet::Write`` / ``Nnet::Read``
  (``src/nnet3/nnet-nnet.cc``); :mod:`.descriptors`: config lines and descriptors;
- :mod:`.components`: THE table of component kinds (Kaldi type → write, read, apply,
  dims), their functions in ``kinds_*`` beside the Kaldi files they mirror;
  :mod:`.fields`: the fields they share;
- :mod:`.compute`: the network on one utterance, and its contexts.

The networks each family becomes, and the fields of each component:
docs/export-and-vosk.md ("The nnet3 writer"). The ``final.mdl`` around the network:
:mod:`paravg.export.final_mdl`.
"""

from paravg.export.nnet3.build import nnet3_from_model
from paravg.export.nnet3.components import COMPONENTS, KNOWN_TYPES, Component
from paravg.export.nnet3.compute import compute, nnet_context
from paravg.export.nnet3.fields import NgOptions
from paravg.export.nnet3.network import Nnet3, read_nnet3, write_nnet3

__all__ = [
    "COMPONENTS",
    "KNOWN_TYPES",
    "Component",
    "NgOptions",
    "Nnet3",
    "compute",
    "nnet3_from_model",
    "nnet_context",
    "read_nnet3",
    "write_nnet3",
]
