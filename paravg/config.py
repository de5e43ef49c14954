"""Configuration: schema validation with defaults, and per-experiment resolution.

``config/config.schema.yaml`` is a JSON Schema with ``default`` values and
``additionalProperties: false`` everywhere. :func:`validate_config` fills the defaults
in place and raises :class:`ConfigError` naming the offending key. Experiments are
overrides of ``model``/``trainer``/``sync`` (and ``ivector.enabled``) deep-merged over the
top-level sections; each merged section is validated against the same sub-schema, so an
experiment cannot introduce a key the top level would reject.
"""

from __future__ import annotations

import copy
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import jsonschema

from paravg.errors import ConfigError
from paravg.nnet.families import families_with, family_of, known_family, trainer_keys_of_others
from paravg.optim.options import NgsgdOptions
from paravg.schema import SCHEMA_PATH, parsed_schema

REPO_CONFIG = Path(__file__).resolve().parent.parent / "config" / "config.yaml"
EXPERIMENT_SECTIONS = ("model", "trainer", "sync")


def _with_defaults(validator_class):
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if isinstance(sub, dict) and "$ref" in sub and "default" not in sub:
                    sub = validator._resolver.lookup(sub["$ref"]).contents
                if isinstance(sub, dict) and "default" in sub:
                    instance.setdefault(name, copy.deepcopy(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


_DefaultFillingValidator = _with_defaults(jsonschema.Draft202012Validator)


def load_schema(path: str | Path = SCHEMA_PATH) -> dict:
    """The YAML schema (parsed once per process; each caller gets its own copy), with
    ``sync.method``'s enum from the sync registry (a new method is one registry entry)."""
    from paravg.sync.registry import SYNC_METHODS

    schema = copy.deepcopy(parsed_schema(str(path)))
    method = schema.get("$defs", {}).get("sync", {}).get("properties", {}).get("method")
    if method is not None:
        method["enum"] = list(SYNC_METHODS)
    return schema


def _yaml11_float_string(value: Any) -> bool:
    """A string that YAML 1.2 would read as a number (``5e-05``, ``1E3``) but PyYAML's
    YAML 1.1 resolver keeps as text (it needs a dot and a signed exponent)."""
    if not isinstance(value, str):
        return False
    try:
        float(value)
    except ValueError:
        return False
    return True


def yaml11_float_hint(text: str) -> str:
    """How to write the number ``text`` so that PyYAML reads a float."""
    x = float(text)
    mantissa, exponent = f"{x:.15e}".split("e")
    mantissa = mantissa.rstrip("0")
    mantissa += "0" if mantissa.endswith(".") else ""
    decimal = format(Decimal(repr(x)), "f")
    return (
        f"YAML 1.1 reads {text} as a string, not a number: write {decimal} or "
        f"{mantissa}e{int(exponent):+03d} (a dot in the mantissa, a sign in the exponent)"
    )


def _validate(instance: Any, schema: dict, where: str) -> None:
    validator = _DefaultFillingValidator(schema)
    errors = sorted(validator.iter_errors(instance), key=lambda e: list(e.absolute_path))
    if errors:
        lines = []
        for err in errors:
            key = ".".join(str(p) for p in err.absolute_path) or "<top level>"
            lines.append(f"  {where}{'.' if where and key else ''}{key}: {err.message}")
            if _yaml11_float_string(err.instance) and "number" in str(err.validator_value):
                lines.append(f"    ({yaml11_float_hint(err.instance)})")
        raise ConfigError("invalid configuration:\n" + "\n".join(lines))


def deep_merge(base: dict, override: dict) -> dict:
    """Return ``base`` with ``override`` merged in recursively (dicts merge, rest replaces)."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def validate_config(config: dict, schema_path: str | Path = SCHEMA_PATH) -> dict:
    """Validate ``config`` in place (filling defaults) and check cross-key rules (the
    ``graph``/``decode``/``export`` sections' are
    :func:`paravg.graph.settings.check_recognition_config`'s, which the Snakefile runs next).

    Returns the same dict for convenience. Raises :class:`ConfigError` with every
    problem found, each naming its key.
    """
    schema = load_schema(schema_path)
    _validate(config, schema, "")
    resolved_experiments(config, schema_path)
    check_perturb(config)
    own, train = config["data"]["sets"], config["data"]["train_set"]
    if not uses_demo(config):
        missing = [s for s in config["eval_sets"] if s not in own]
        if missing:
            raise ConfigError(f"eval_sets names sets not in data.sets: {missing}")
        return config
    demo = demo_set_names(config)
    if train not in demo:
        raise ConfigError(
            f"data.train_set {train!r} is neither in data.sets {sorted(own)} nor a set of "
            f"the demo corpus {demo}"
        )
    missing = [s for s in config["eval_sets"] if s not in demo and s not in own]
    if missing:
        beside = f" or data.sets {sorted(own)}" if own else ""
        raise ConfigError(
            f"eval_sets names {missing}, but the demo corpus has the sets {demo} "
            f"(dev only with demo.dev_fraction > 0){beside}"
        )
    return config


def perturbed_train_set(config: dict) -> str | None:
    """The set the model trains on when ``data.perturb`` asks for copies: ``<train>_sp``
    (speed factors given; Kaldi's ``data/train_sp``) or ``<train>_vp`` (volume only), made
    from the prepared ``data.train_set`` by rule ``perturb_data``; None when off."""
    perturb, train = config["data"]["perturb"], config["data"]["train_set"]
    if perturb["speed"]:
        return f"{train}_sp"
    return f"{train}_vp" if perturb["volume"] else None


def check_perturb(config: dict) -> None:
    """``data.perturb``'s cross-key rules: ``scale_low <= scale_high`` (when volume is
    on), and the perturbed set's name is no configured set's."""
    perturb = config["data"]["perturb"]
    if perturb["volume"] and perturb["scale_low"] > perturb["scale_high"]:
        raise ConfigError(
            f"data.perturb.scale_low = {perturb['scale_low']} is above data.perturb."
            f"scale_high = {perturb['scale_high']}: the gains are drawn from "
            "[scale_low, scale_high]"
        )
    name = perturbed_train_set(config)
    if name is None:
        return
    demo = demo_set_names(config) if uses_demo(config) else []
    taken = {*config["data"]["sets"], *config["eval_sets"], *demo}
    if name in taken:
        raise ConfigError(
            f"data.perturb: the perturbed training set is called {name!r}, but that name "
            f"is already a set of this run (data.sets, eval_sets or the demo's): rename it"
        )


def uses_demo(config: dict) -> bool:
    """Whether the run trains on the demo corpus: ``data.sets`` does not name
    ``data.train_set``. The demo's sets are then there beside those ``data.sets`` names
    (a set it names is its own, even one called like a demo set), so a set added to a
    demo run changes nothing of the demo sets' jobs."""
    return config["data"]["train_set"] not in config["data"]["sets"]


def data_set_sources(config: dict, demo_dir) -> dict[str, str]:
    """Set name -> source Kaldi data dir: the demo corpus's sets (``demo_dir(set)``) when
    the run trains on it, then every set of ``data.sets``."""
    sets = {s: demo_dir(s) for s in demo_set_names(config)} if uses_demo(config) else {}
    return {**sets, **config["data"]["sets"]}


def demo_beside_own_sets(config: dict) -> str | None:
    """The start-up note of a run that trains on the demo corpus with sets of its own."""
    own = config["data"]["sets"]
    if not own or not uses_demo(config):
        return None
    return (
        f"paravg: data.train_set {config['data']['train_set']} is not in data.sets: training "
        f"on the demo corpus, with data.sets {sorted(own)} beside its sets"
    )


def resolved_experiments(config: dict, schema_path: str | Path = SCHEMA_PATH) -> dict[str, dict]:
    """Every experiment's effective config (:func:`experiment_config`), resolved once per
    config content: validation, the DAG and the plans all read copies of the same dicts.

    Resolved from ``config`` itself (not from its JSON): a model config's strings stay the
    objects they are in ``config``, and pickling (``torch.save`` of a model file that
    carries its config) writes the same bytes as from a config resolved without a cache.
    """
    key = (json.dumps(config, default=str), str(schema_path))  # order kept: experiments'
    if key not in _RESOLVED:
        schema = load_schema(schema_path)
        if len(_RESOLVED) >= 8:
            _RESOLVED.pop(next(iter(_RESOLVED)))
        _RESOLVED[key] = {
            name: experiment_config(config, name, schema) for name in config["experiments"]
        }
    return copy.deepcopy(_RESOLVED[key])  # a caller's edit stays its own


_RESOLVED: dict[tuple[str, str], dict[str, dict]] = {}


def demo_set_names(config: dict) -> list[str]:
    """The demo corpus's sets: train, test, and dev when ``demo.dev_fraction`` > 0."""
    return ["train", "test"] + (["dev"] if config["demo"]["dev_fraction"] > 0 else [])


def experiment_config(config: dict, name: str, schema: dict | None = None) -> dict:
    """The effective ``model``/``trainer``/``sync``/``ivector_enabled`` of one experiment."""
    if name not in config["experiments"]:
        raise ConfigError(f"unknown experiment {name!r}; defined: {sorted(config['experiments'])}")
    schema = schema or load_schema()
    overrides = config["experiments"][name] or {}
    out: dict[str, Any] = {}
    for section in EXPERIMENT_SECTIONS:
        merged = deep_merge(config[section], overrides.get(section, {}))
        family = known_family(merged) if section == "model" else None  # else: the schema says
        if family is not None and family.section_defaults:
            merged.setdefault(family.section, {})  # its keys get their defaults
        sub = dict(schema["$defs"][section])
        sub["$defs"] = schema["$defs"]
        _validate(merged, sub, f"experiments.{name}.{section}")
        out[section] = merged
    wants = overrides.get("ivector", {}).get("enabled")
    if wants and not config["ivector"]["enabled"]:
        raise ConfigError(
            f"experiments.{name}.ivector.enabled is true but ivector.enabled is false: the "
            "i-vectors are extracted once for every experiment; set ivector.enabled: true "
            "and turn them off per experiment with ivector: {enabled: false}"
        )
    out["ivector_enabled"] = bool(config["ivector"]["enabled"] and wants is not False)
    _check_experiment(name, out)
    _check_chunk_egs(name, config["egs"], out)
    return out


def _check_chunk_egs(name: str, egs: dict, exp: dict) -> None:
    """Chunk egs (``egs.chunk_width``, Kaldi's ``train_rnn.py``) and the chunk-eg families
    (:data:`paravg.nnet.families.FAMILIES`, ``egs: chunk``) go together: the egs are shared
    by every experiment, a ``tdnn_lstm`` experiment needs them and the frame-eg families
    (tdnn, tdnnf) train on frame egs only (a TDNN on chunk egs, which Kaldi allows, is not
    implemented). The chunk trainer keys belong to the chunk-eg families. None of these
    keys has a schema default, so a TDNN's resolved config, rule params and model files
    are what they were without them."""
    from paravg.egs.chunking import ChunkOptions
    from paravg.egs.minibatch import MinibatchRule

    chunks = ChunkOptions.from_egs_config(egs)
    family = family_of(exp["model"])
    recurrent = family.chunk_egs
    where = f"experiments.{name}"
    if family.section and not family.section_defaults and family.section not in exp["model"]:
        raise ConfigError(
            f"{where}.model: family {family.name} needs model.{family.section}{family.section_hint}"
        )
    if recurrent and chunks is None:
        raise ConfigError(
            f"{where}.model.family is {family.name}, a recurrent family trained on chunk egs "
            "(Kaldi's train_rnn.py): set egs.chunk_width (e.g. '40,30,20')"
        )
    chunk_families = ", ".join(families_with(egs="chunk"))
    if not recurrent and chunks is not None:
        raise ConfigError(
            f"{where}.model.family is {family.name}, which trains on frame egs, but "
            f"egs.chunk_width is set ({egs['chunk_width']!r}): chunk egs train the "
            f"recurrent family ({chunk_families}) only; remove egs.chunk_width or the "
            "experiment"
        )
    if chunks is not None and exp["model"].get("frame_subsampling_factor", 1) != 1:
        raise ConfigError(
            f"{where}.model.frame_subsampling_factor with chunk egs is not implemented "
            "(Kaldi rounds the chunk widths up to multiples of it and scores every f-th "
            "frame of a chunk); remove it or use a frame-eg family"
        )
    _check_chain(where, exp["model"], family, egs)
    extra = sorted(k for k in trainer_keys_of_others(family) if k in exp["trainer"])
    if extra:
        raise ConfigError(
            f"{where}.trainer: {extra} are options of chunk training (family "
            f"{chunk_families}); the family is {family.name}"
        )
    if "num_chunk_per_minibatch" in exp["trainer"]:
        MinibatchRule.parse(
            exp["trainer"]["num_chunk_per_minibatch"], f"{where}.trainer.num_chunk_per_minibatch"
        )


def _check_chain(where: str, model: dict, family, egs: dict) -> None:
    """``model.objective: chain`` (docs/chain.md): a TDNN-F on frame egs whose
    ``frames_per_eg`` is a multiple of f (a chain eg's output frames are its frames 0, f,
    2f, ...; Kaldi's chain egs are whole multiples); ``model.chain`` only with it."""
    chain = model.get("objective", "xent") == "chain"
    if "chain" in model and not chain:
        raise ConfigError(f"{where}.model.chain is set but model.objective is not chain")
    if not chain:
        return
    f = model.get("frame_subsampling_factor", 1)
    if not family.chain:
        raise ConfigError(
            f"{where}.model.objective chain trains the {', '.join(families_with(chain=True))} "
            f"family only, not {family.name}"
        )
    if egs["frames_per_eg"] % f or egs["frames_per_eg"] < 2 * f:
        raise ConfigError(
            f"{where}.model.objective chain: egs.frames_per_eg ({egs['frames_per_eg']}) "
            f"must be a multiple of model.frame_subsampling_factor ({f}), at least 2 of them"
        )


def _check_experiment(name: str, exp: dict) -> None:
    trainer, sync = exp["trainer"], exp["sync"]
    # --- fidelity (issue 13): Kaldi minibatch rule strings, checked before any work ---
    from paravg.egs.minibatch import MinibatchRule

    MinibatchRule.parse(trainer["minibatch_size"], f"experiments.{name}.trainer.minibatch_size")
    model = exp["model"]
    family = family_of(model)
    if trainer.get("dropout_schedule"):
        from paravg.nnet.dropout_schedule import parse_dropout_schedule

        if not family.dropout:
            raise ConfigError(
                f"experiments.{name}.trainer.dropout_schedule is set but the model family "
                f"{family.name} has no dropout: use model.family "
                f"{' or '.join(families_with(dropout=True))} or remove the schedule"
            )
        parse_dropout_schedule(trainer["dropout_schedule"])
    if family.check is not None:
        family.check(model, f"experiments.{name}")
    # --- end fidelity ---
    # the code-side validator of the affine layers' optimiser (paravg.optim.options)
    NgsgdOptions.from_config(trainer["ngsgd"], f"experiments.{name}.trainer.ngsgd")
    if trainer["num_jobs_final"] < trainer["num_jobs_initial"]:
        raise ConfigError(
            f"experiments.{name}.trainer: num_jobs_final ({trainer['num_jobs_final']}) must be "
            f">= num_jobs_initial ({trainer['num_jobs_initial']})"
        )
    from paravg.sync.registry import get_method

    if get_method(sync["method"]).fixed_num_jobs and (
        trainer["num_jobs_initial"] != trainer["num_jobs_final"]
    ):
        raise ConfigError(
            f"experiments.{name}: sync.method {sync['method']!r} needs a fixed number of jobs; "
            f"set trainer.num_jobs_initial = trainer.num_jobs_final (now "
            f"{trainer['num_jobs_initial']} -> {trainer['num_jobs_final']})"
        )
