"""init_model refuses egs cut with a narrower context than the model's (paravg.nnet.initialize)."""

import pytest

from paravg.egs import EgsInfo
from paravg.errors import ConfigError
from paravg.nnet.initialize import init_model
from tests.unit.dummies import tdnn_config

CFG = tdnn_config((8, [0]), (8, [-3, 0, 3]))


def test_a_model_wider_than_the_egs_context_is_a_config_error(tmp_path):
    info = EgsInfo(
        num_archives=1,
        frames_per_eg=8,
        egs_per_archive=10,
        num_frames=80,
        feat_dim=5,
        ivector_dim=0,
        ivector_period=0,
        left_context=4,
        right_context=5,
        num_targets=3,
    )
    info.save(tmp_path / "info.json")
    with pytest.raises(
        ConfigError,
        match=r"context \(5, 5\) \(from model\.input_splice .* exceeds the egs context \(4, 5\) "
        r".*info\.json: the egs must be rebuilt",
    ):
        init_model(tmp_path / "info.json", [], CFG, False, 0, 0, tmp_path / "0.pt", tmp_path / "s")
    assert not (tmp_path / "0.pt").exists()
