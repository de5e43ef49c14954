"""The config of the recurrent family and its chunk egs (Kaldi's train_rnn.py options):
accepted with ``family: tdnn_lstm``, refused elsewhere, and without a schema default that
would change a TDNN's or a TDNN-F's resolved config, rule params or model files."""

import copy

import pytest
import yaml

from paravg.config import (
    REPO_CONFIG,
    deep_merge,
    load_schema,
    resolved_experiments,
    validate_config,
)
from paravg.egs.chunking import ChunkOptions, parse_chunk_widths
from paravg.errors import ConfigError
from paravg.plan import experiment_plans

INFO = {"num_archives": 12, "frames_per_eg": 8, "num_frames": 123456}
LSTM_MODEL = {
    "family": "tdnn_lstm",
    "tdnn_lstm": {
        "output_delay": 2,
        "layers": [
            {"type": "tdnn", "dim": 32, "splice": [-1, 0, 1]},
            {"type": "lstm", "cell_dim": 16, "delay": -3, "decay_time": 20},
        ],
    },
}
LSTM = {"model": LSTM_MODEL, "trainer": {"num_chunk_per_minibatch": "128,64"}}
CHUNK_EGS = {"chunk_width": "40,30,20", "chunk_left_context_initial": 0}
NEW_EGS_KEYS = {
    "chunk_width",
    "chunk_left_context",
    "chunk_right_context",
    "chunk_left_context_initial",
    "chunk_right_context_final",
}
NEW_TRAINER_KEYS = {
    "num_chunk_per_minibatch",
    "deriv_truncate_margin",
    "momentum",
    "shrink_value",
    "shrink_saturation_threshold",
    "proportional_shrink",
}


def config(overrides=None, schema_path=None):
    cfg = deep_merge(yaml.safe_load(REPO_CONFIG.read_text()), overrides or {})
    return validate_config(cfg, schema_path) if schema_path else validate_config(cfg)


def test_a_tdnn_lstm_experiment_with_chunk_egs_validates_and_keeps_what_was_written():
    cfg = config({"egs": CHUNK_EGS, "experiments": {"l": LSTM}})
    exp = resolved_experiments(cfg)["l"]
    assert exp["model"]["tdnn_lstm"] == LSTM_MODEL["tdnn_lstm"]  # no layer defaults filled
    assert exp["trainer"]["num_chunk_per_minibatch"] == "128,64"
    assert "deriv_truncate_margin" not in exp["trainer"]  # the code's default (8) applies
    assert {k: cfg["egs"][k] for k in CHUNK_EGS} == CHUNK_EGS


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"experiments": {"l": LSTM}}, r"recurrent family .*set egs\.chunk_width"),
        ({"egs": {"chunk_width": 20}, "experiments": {"a": {}}}, r"tdnn, which trains on frame"),
        ({"egs": {"chunk_left_context": 3}}, r"without egs\.chunk_width"),
        ({"egs": {"chunk_right_context_final": 0}}, r"without egs\.chunk_width"),
        ({"experiments": {"a": {"trainer": {"deriv_truncate_margin": 3}}}}, r"options of chunk"),
        ({"experiments": {"a": {"trainer": {"num_chunk_per_minibatch": 3}}}}, r"options of chunk"),
        ({"experiments": {"a": {"trainer": {"shrink_value": 0.99}}}}, r"options of chunk"),
        ({"experiments": {"a": {"trainer": {"shrink_value": 0.4}}}}, r"shrink_value"),
        ({"egs": {"chunk_width": "20,,3"}, "experiments": {"l": LSTM}}, r"chunk_width"),
        ({"egs": {"chunk_width": 0}, "experiments": {"l": LSTM}}, r"chunk_width"),
        ({"egs": {"chunk_left_context_initial": -2, "chunk_width": 9}}, r"initial"),
        (
            {
                "egs": {"chunk_width": 20},
                "experiments": {"l": deep_merge(LSTM, {"model": {"frame_subsampling_factor": 3}})},
            },
            r"frame_subsampling_factor with chunk egs",
        ),
        (
            {"egs": {"chunk_width": 20}, "experiments": {"l": {"model": {"family": "tdnn_lstm"}}}},
            r"needs model\.tdnn_lstm\.layers",
        ),
        (
            {
                "egs": {"chunk_width": 20},
                "experiments": {
                    "l": {"model": {**LSTM_MODEL, "tdnn_lstm": {"layers": [{"type": "lstm"}]}}}
                },
            },
            r"cell_dim",
        ),
        (
            {
                "egs": {"chunk_width": 20},
                "experiments": {
                    "l": {
                        "model": {
                            **LSTM_MODEL,
                            "tdnn_lstm": {"layers": [{"type": "tdnn", "dim": 3, "delay": -3}]},
                        }
                    }
                },
            },
            r"'delay' was unexpected",
        ),
        (
            {
                "egs": {"chunk_width": 20},
                "experiments": {"l": {**LSTM, "trainer": {"num_chunk_per_minibatch": "64,"}}},
            },
            r"num_chunk_per_minibatch",
        ),
    ],
)
def test_wrong_chunk_combinations_are_config_errors(overrides, match):
    with pytest.raises(ConfigError, match=match):
        config(overrides)


def test_a_proportional_shrink_too_large_for_the_schedule_stops_the_plan():
    """train_rnn.py refuses 1 − p·lr ≤ 0.5 when it reaches that iteration; paravg's plan
    refuses it before any work, naming the key (here the largest per-job rate is 0.0026)."""
    ok = config({"experiments": {"a": {"trainer": {"proportional_shrink": 10.0, "momentum": 0.3}}}})
    job = experiment_plans(ok, INFO)["a"].job(3, 0)  # a TDNN: both are train_dnn.py options
    assert (job.proportional_shrink, job.momentum) == (10.0, 0.3)
    bad = config({"experiments": {"a": {"trainer": {"proportional_shrink": 250.0}}}})
    with pytest.raises(ConfigError, match=r"a\.trainer\.proportional_shrink = 250\.0 gives"):
        experiment_plans(bad, INFO)


def _old_schema(tmp_path):
    """The schema without this change's keys (and without tdnn_lstm in the enum)."""
    schema = copy.deepcopy(load_schema())
    schema["$defs"]["model"]["properties"]["family"]["enum"].remove("tdnn_lstm")
    del schema["$defs"]["model"]["properties"]["tdnn_lstm"]
    for key in NEW_TRAINER_KEYS:
        del schema["$defs"]["trainer"]["properties"][key]
    for key in NEW_EGS_KEYS:
        del schema["properties"]["egs"]["properties"][key]
    path = tmp_path / "old.schema.yaml"
    path.write_text(yaml.safe_dump(schema))
    return path


def test_tdnn_and_tdnnf_resolved_configs_params_and_fingerprints_are_unchanged(tmp_path):
    """No new key has a schema default: a TDNN's and a TDNN-F's egs section, resolved
    experiment (hence model config, hence model bytes), job rule params and fingerprints
    are those the schema without the chunk keys gives."""
    over = {"experiments": {"a": {}, "f": {"model": {"family": "tdnnf"}}}}
    new, old = config(over), config(over, _old_schema(tmp_path))
    assert new["egs"] == old["egs"] and NEW_EGS_KEYS.isdisjoint(new["egs"])
    resolved = resolved_experiments(new)
    assert resolved == resolved_experiments(old, _old_schema(tmp_path))
    for exp in resolved.values():
        assert NEW_TRAINER_KEYS.isdisjoint(exp["trainer"]) and "tdnn_lstm" not in exp["model"]
    new_plans, old_plans = experiment_plans(new, INFO), experiment_plans(old, INFO)
    for name in ("a", "f"):
        p, q = new_plans[name], old_plans[name]
        assert [p.job_rule(t, 0) for t in range(4)] == [q.job_rule(t, 0) for t in range(4)]
        assert [p.fingerprint(t) for t in range(4)] == [q.fingerprint(t) for t in range(4)]


def test_chunk_widths_and_train_rnn_contexts():
    assert parse_chunk_widths("40,30,20") == (40, 30, 20) and parse_chunk_widths(7) == (7,)
    with pytest.raises(ConfigError):
        parse_chunk_widths("40,x")
    assert ChunkOptions.from_egs_config({"frames_per_eg": 8}) is None
    o = ChunkOptions.from_egs_config({"chunk_width": "40,30,20"})
    # train_rnn.py's defaults: chunk-left-context 40, right 0, initial / final -1 (= same)
    assert (o.principal, o.chunk_left_context, o.chunk_right_context) == (40, 40, 0)
    assert o.contexts(15, 20) == (55, 20, 55, 20)
    # WSJ run_tdnn_lstm_1a: initial 0 and final 0 → the model's own context at the edges
    o = ChunkOptions.from_egs_config(
        {"chunk_width": 40, "chunk_left_context_initial": 0, "chunk_right_context_final": 0}
    )
    assert o.contexts(15, 20) == (55, 20, 15, 20)
    o = ChunkOptions.from_egs_config(
        {"chunk_width": 40, "chunk_right_context": 5, "chunk_right_context_final": 2}
    )
    assert o.contexts(1, 3) == (41, 8, 41, 5)
    # the egs stage's options (absent keys are None there): train_rnn.py's defaults
    from paravg.egs.plan import EgsOptions

    opts = EgsOptions.from_config({"chunk_width": "20,10"}, 2, 3)
    assert opts.chunks.contexts(2, 3) == (42, 3, 42, 3)
    assert EgsOptions.from_config({}, 2, 3).chunks is None
