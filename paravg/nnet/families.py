"""The one table of model families: what each is, as the workflow sees it (torch-free).

Every family is one :class:`ModelFamily` entry of :data:`FAMILIES`, as every sync method
is one entry of :data:`paravg.sync.registry.SYNC_METHODS`. The entry answers everything
the code asks of a family, so that nothing outside this module compares
``model.family`` with a name (``tests/unit/nnet/test_families.py`` reads ``paravg/``
with :mod:`ast` to keep it so):

1. **model** (``"module:Class"``, :meth:`ModelFamily.model_class`): the torch class,
   an :class:`paravg.nnet.acoustic.AcousticModel`, imported only when a model is built
   (:mod:`paravg.nnet.model_file`), so that the config, the plan and the DAG read this
   table without torch.
2. **egs** (``frame`` or ``chunk``): frame egs (``steps/nnet3/train_dnn.py``, one
   output frame per eg index) or chunk egs (``train_rnn.py``: whole chunks, their
   trainer options :attr:`~ModelFamily.trainer_keys` and defaults
   :attr:`~ModelFamily.trainer_defaults`; one window per utterance when decoding).
3. **context** and **megabytes**: the model context (left, right) in input frames and
   the size of its state dict, from the config alone (:mod:`paravg.nnet.family_configs`).
4. **section**: the ``model`` key holding the family's own options (``model.tdnnf``);
   ``section_defaults``: filled with the schema's defaults when absent, else required.
5. **dropout**, **l2_regularize**: whether the family has dropout components (a
   ``trainer.dropout_schedule`` applies) and l2-regularize (``train_dnn.py``'s
   ``--l2-regularize-factor`` = 1/N then goes to every job).
6. **check**: the family's config check beyond the schema (run by :mod:`paravg.config`).
7. **nnet3** (``"module:function"``): the builder of its nnet3 network
   (:mod:`paravg.export.nnet3.build`).

Model-side hooks that differ by family (LSTM saturation for ``train_rnn.py``'s shrink
step, dropout, batch-norm statistics) are methods of the model class
(:class:`~paravg.nnet.acoustic.AcousticModel`), each a no-op where a family has nothing
to do. Adding a family: docs/architecture.md, "Adding a model family".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import import_module

from paravg.errors import ConfigError
from paravg.nnet import family_configs as fc

#: ``model.family`` when a config (or a model file written before TDNN-F) has none
DEFAULT_FAMILY = "tdnn"
EGS_KINDS = ("frame", "chunk")

#: train_rnn.py's defaults: --trainer.rnn.num-chunk-per-minibatch, --trainer.deriv-
#: truncate-margin, --trainer.optimization.momentum (train_dnn.py's momentum is 0)
RNN_TRAINER_DEFAULTS = {
    "num_chunk_per_minibatch": "100",
    "deriv_truncate_margin": 8,
    "momentum": 0.5,
}
#: trainer keys of chunk training only (train_rnn.py's options; no schema default)
RNN_TRAINER_KEYS = (
    "num_chunk_per_minibatch",
    "deriv_truncate_margin",
    "shrink_value",
    "shrink_saturation_threshold",
)


def _resolve(path: str):
    """The object a ``"module:name"`` path names (imported now)."""
    module, _, name = path.partition(":")
    return getattr(import_module(module), name)


@dataclass(frozen=True)
class ModelFamily:
    """One model family as the workflow sees it (module docstring)."""

    name: str
    summary: str
    model: str  # "module:Class" of the torch model
    nnet3: str  # "module:function" building its nnet3 network (model, lr, ng) -> Nnet3
    egs: str  # "frame" or "chunk"
    context: Callable[[dict], tuple[int, int]]
    megabytes: Callable[[dict, int, int, int], float]
    section: str | None = None  # model config key of the family's own options
    section_defaults: bool = False  # absent section: schema defaults (else required)
    section_hint: str = ""  # what a required section holds, for the error naming it
    dropout: bool = False
    l2_regularize: bool = False
    chain: bool = False  # trains with model.objective chain (paravg.chain.train)
    check: Callable[[dict, str], None] | None = None  # (model config, "experiments.<name>")
    trainer_keys: tuple[str, ...] = ()  # trainer options only this family takes
    trainer_defaults: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.egs not in EGS_KINDS:
            raise ValueError(f"family {self.name}: egs {self.egs!r} is not one of {EGS_KINDS}")

    @property
    def chunk_egs(self) -> bool:
        """Trained on chunk egs (``train_rnn.py``) and decoded one window per utterance."""
        return self.egs == "chunk"

    def model_class(self) -> type:
        """The torch class (imports torch)."""
        return _resolve(self.model)

    def nnet3_builder(self) -> Callable:
        """The nnet3 builder (imports the export package)."""
        return _resolve(self.nnet3)

    def job_params(self, trainer: dict) -> dict:
        """What a train job of this family computes with beyond the frame families' params:
        for chunk egs (``train_rnn.py``) chunks per minibatch, the derivative truncation
        margin and momentum, from ``trainer`` or the family's defaults."""
        if not self.chunk_egs:
            return {}
        d = self.trainer_defaults
        return {
            "minibatch_size": trainer.get("num_chunk_per_minibatch", d["num_chunk_per_minibatch"]),
            "chunk_training": True,
            "deriv_truncate_margin": trainer.get(
                "deriv_truncate_margin", d["deriv_truncate_margin"]
            ),
            "momentum": d["momentum"],
        }


FAMILIES: dict[str, ModelFamily] = {
    f.name: f
    for f in (
        ModelFamily(
            name="tdnn",
            summary="relu-renorm TDNN layers (model.hidden; Kaldi's run_tdnn.sh)",
            model="paravg.nnet.tdnn:TdnnModel",
            nnet3="paravg.export.nnet3.build_tdnn:tdnn_nnet3",
            egs="frame",
            context=fc.tdnn_context,
            megabytes=fc.tdnn_megabytes,
        ),
        ModelFamily(
            name="tdnnf",
            summary="factorised TDNN with batch-norm and dropout (model.tdnnf; run_tdnn_7q.sh)",
            model="paravg.nnet.tdnnf:TdnnfModel",
            nnet3="paravg.export.nnet3.build_tdnnf:tdnnf_nnet3",
            egs="frame",
            context=fc.tdnnf_context,
            megabytes=fc.tdnnf_megabytes,
            section="tdnnf",
            section_defaults=True,
            dropout=True,
            l2_regularize=True,
            chain=True,
            check=fc.check_tdnnf,
        ),
        ModelFamily(
            name="tdnn_lstm",
            summary="relu-renorm and fast-lstmp layers on chunk egs (model.tdnn_lstm; "
            "run_tdnn_lstm_1a.sh)",
            model="paravg.nnet.lstm:TdnnLstmModel",
            nnet3="paravg.export.nnet3.build_tdnn_lstm:tdnn_lstm_nnet3",
            egs="chunk",
            context=fc.tdnn_lstm_context,
            megabytes=fc.tdnn_lstm_megabytes,
            section="tdnn_lstm",
            section_hint=".layers (a list of {type: tdnn, dim: D[, splice: [...]]} and "
            "{type: lstm, cell_dim: C, ...})",
            l2_regularize=True,
            trainer_keys=RNN_TRAINER_KEYS,
            trainer_defaults=RNN_TRAINER_DEFAULTS,
        ),
    )
}


def get_family(name: str) -> ModelFamily:
    """The registered family ``name``; a ConfigError listing the known ones otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ConfigError(f"model family {name!r} is not one of {sorted(FAMILIES)}") from None


def family_name(model_cfg: dict) -> str:
    """The family a model config names (``model.family``; :data:`DEFAULT_FAMILY` when
    absent: every file written before TDNN-F)."""
    return model_cfg.get("family", DEFAULT_FAMILY)


def known_family(model_cfg: dict) -> ModelFamily | None:
    """The family of a model config not yet validated, or None for a name that is not a
    family (the schema's enum then says what is wrong)."""
    name = family_name(model_cfg)
    return FAMILIES.get(name) if isinstance(name, str) else None


def family_of(model_cfg: dict) -> ModelFamily:
    """The family of a model config."""
    return get_family(family_name(model_cfg))


def families_with(**properties) -> list[str]:
    """The names of the families whose entries have these attribute values, in table order
    (``families_with(egs="chunk")``)."""
    return [
        f.name for f in FAMILIES.values() if all(getattr(f, k) == v for k, v in properties.items())
    ]


def trainer_keys_of_others(family: ModelFamily) -> tuple[str, ...]:
    """The trainer options of other families that ``family`` does not take (a config
    setting one of them is refused)."""
    mine = set(family.trainer_keys)
    return tuple(
        dict.fromkeys(k for f in FAMILIES.values() for k in f.trainer_keys if k not in mine)
    )
