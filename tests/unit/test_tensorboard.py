"""The standard-library TensorBoard event files: CRC-32C, the TFRecord framing and Event
encoding (paravg.tensorboard), and the per-experiment file the diagnostics rule keeps
(paravg.training_events): values equal to the JSON, steps in order and each once, valid
after a torn write."""

import json
import struct
from pathlib import Path

import pytest

from paravg.layout import Layout
from paravg.tensorboard import (
    FILE_VERSION,
    EventWriter,
    crc32c,
    decode_event,
    encode_event,
    frame_record,
    main,
    masked_crc32c,
    read_events,
    read_records,
)
from paravg.training_events import append_new_steps, step_scalars


@pytest.mark.parametrize(
    ("data", "crc"),
    [
        (b"123456789", 0xE3069283),  # the check value of CRC-32C
        (bytes(32), 0x8A9136AA),  # RFC 3720, B.4 (and TensorFlow's crc32c_test.cc)
        (b"\xff" * 32, 0x62A8AB43),
        (bytes(range(32)), 0x46DD794E),
        (bytes(range(31, -1, -1)), 0x113FDB5C),
        (b"", 0),
    ],
)
def test_crc32c_known_vectors(data, crc):
    assert crc32c(data) == crc


def test_masked_crc_is_tfrecords_rotation_plus_delta():
    crc = crc32c(b"foo")
    rotated = ((crc >> 15) | (crc << 17)) & 0xFFFFFFFF
    assert masked_crc32c(b"foo") == (rotated + 0xA282EAD8) & 0xFFFFFFFF


def test_event_encoding_is_the_protobuf_bytes():
    """Hand-written wire bytes of Event{wall_time 1.5, step 3, summary{value{tag "a",
    simple_value 2.0}}}: what tensorboardX serializes for add_scalar("a", 2.0, 3)."""
    value = b"\x0a\x01a" + b"\x15" + struct.pack("<f", 2.0)
    summary = b"\x0a" + bytes([len(value)]) + value
    expected = b"\x09" + struct.pack("<d", 1.5) + b"\x10\x03" + b"\x2a" + bytes([len(summary)])
    assert encode_event(3, 1.5, {"a": 2.0}) == expected + summary
    version = encode_event(0, 1.5, file_version=FILE_VERSION)
    assert version.endswith(b"\x1a\x0dbrain.Event:2")


def test_record_framing():
    data = b"hello"
    rec = frame_record(data)
    assert rec[:8] == struct.pack("<Q", 5)
    assert rec[8:12] == struct.pack("<I", masked_crc32c(rec[:8]))
    assert rec[12:17] == data
    assert rec[17:] == struct.pack("<I", masked_crc32c(data))


def test_round_trip_and_negative_step(tmp_path):
    path = tmp_path / "events.out.tfevents.x"
    w = EventWriter(path)
    w.add_scalars(0, {"train/logprob": -1.25, "valid/accuracy": 0.5}, wall_time=10.0)
    w.add_scalars(1, {"train/logprob": -1.0}, wall_time=11.0)
    events = read_events(path)
    assert events[0].file_version == FILE_VERSION and not events[0].scalars
    assert [(e.step, e.wall_time, e.scalars) for e in events[1:]] == [
        (0, 10.0, {"train/logprob": -1.25, "valid/accuracy": 0.5}),
        (1, 11.0, {"train/logprob": -1.0}),
    ]
    assert decode_event(encode_event(-2, 0.0, {"x": 1.0})).step == -2
    # reopening sees the steps and writes no second version record
    w2 = EventWriter(path)
    assert w2.steps == [0, 1]
    w2.add_scalars(2, {"x": 3.0})
    assert sum(e.file_version is not None for e in read_events(path)) == 1


def test_torn_tail_is_skipped_then_cut(tmp_path):
    path = tmp_path / "events.out.tfevents.x"
    w = EventWriter(path)
    w.add_scalars(0, {"x": 1.0})
    whole = path.read_bytes()
    torn = frame_record(encode_event(1, 0.0, {"x": 2.0}))[:-3]
    path.write_bytes(whole + torn)  # a crash in the middle of a write
    records, end = read_records(path)
    assert end == len(whole) and len(records) == 2
    w = EventWriter(path)
    assert w.steps == [0]
    w.add_scalars(1, {"x": 2.0})
    assert [e.scalars for e in read_events(path)[1:]] == [{"x": 1.0}, {"x": 2.0}]
    assert read_records(path)[1] == path.stat().st_size


def test_bad_crc_is_an_error(tmp_path):
    path = tmp_path / "events.out.tfevents.x"
    EventWriter(path).add_scalars(0, {"x": 1.0})
    raw = bytearray(path.read_bytes())
    raw[-6] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="bad data CRC"):
        read_records(path)


def test_dump(tmp_path, capsys):
    EventWriter(tmp_path / "a" / "events.out.tfevents.x").add_scalars(4, {"lr": 0.5})
    assert main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.split("\t")[1:] == ["4", "lr", "0.5\n"]


# ----------------------------------------------------------------- per experiment
def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _fabricate(L, exp, t):
    """The JSON files of model t of a BMUF run (diag, the jobs and sync summary of t − 1)."""
    _write(
        Path(L.diag(exp, t)),
        {
            "iteration": t,
            "train": {"logprob": -2.0 + 0.1 * t, "accuracy": 0.3 + 0.01 * t},
            "valid": {"logprob": -2.5 + 0.1 * t, "accuracy": 0.25 + 0.01 * t},
        },
    )
    if t == 0:
        return
    for j in range(2):
        _write(
            Path(L.job_stats(exp, t, j)),
            {"objf": -1.5 - j, "accuracy": 0.4 + j / 10, "lr": 0.001 * t},
        )
    _write(
        Path(L.sync_summary(exp, t)),
        {
            "iteration": t - 1,
            "objfs": [-1.5, -2.5],
            "accepted": [0, 1] if t > 1 else [0],
            "rejected": [] if t > 1 else [1],
            "method": "bmuf",
            "block_momentum": 0.75,
            "nesterov": True,
            "delta_norm": 0.125 * t,
            "plan": {"fingerprint": "x"},
        },
    )


def test_step_scalars_equal_the_json(tmp_path):
    L, exp = Layout(str(tmp_path / "results")), "bm"
    _fabricate(L, exp, 0)
    _fabricate(L, exp, 1)
    assert step_scalars(L, exp, 0) == {
        "train/logprob": -2.0,
        "train/accuracy": 0.3,
        "valid/logprob": -2.5,
        "valid/accuracy": 0.25,
    }
    s = step_scalars(L, exp, 1)
    assert s["schedule/lr"] == pytest.approx(0.001)
    assert s["schedule/num_jobs"] == 2
    assert s["sync/accepted"] == 1 and s["sync/rejected"] == 1
    assert s["sync/block_momentum"] == 0.75 and s["sync/delta_norm"] == 0.125
    assert s["jobs/objf_mean"] == -2.0 and s["jobs/accuracy_mean"] == pytest.approx(0.45)
    assert "sync/nesterov" not in s and "sync/iteration" not in s and "sync/plan" not in s
    assert step_scalars(L, exp, 2) is None


def test_out_of_order_diagnostics_append_in_step_order_once(tmp_path):
    L, exp = Layout(str(tmp_path / "results")), "bm"
    _fabricate(L, exp, 0)
    _fabricate(L, exp, 2)  # diag 2 finishes before diag 1
    assert append_new_steps(L, exp) == [0]
    assert append_new_steps(L, exp) == []
    _fabricate(L, exp, 1)
    assert append_new_steps(L, exp) == [1, 2]
    assert append_new_steps(L, exp) == []  # a rerun (resume) duplicates nothing
    events = read_events(L.tensorboard_events(exp))
    assert [e.step for e in events if e.scalars] == [0, 1, 2]
    # TensorBoard reads every file whose name holds "tfevents": the lock's must not
    tb_dir = Path(L.tensorboard_events(exp)).parent
    assert [p.name for p in tb_dir.iterdir() if "tfevents" in p.name] == [
        "events.out.tfevents.paravg"
    ]
    for e in events[1:]:
        for tag, value in step_scalars(L, exp, e.step).items():
            assert e.scalars[tag] == pytest.approx(value, rel=1e-6), tag  # float32


def test_steps_of_a_retrained_experiment_are_replaced(tmp_path):
    """Trained again from model 1 after a config change: diag/2.json changes, so the
    file is cut before step 2 and rebuilt; steps 0 and 1 stay, once each."""
    L, exp = Layout(str(tmp_path / "results")), "bm"
    for t in range(3):
        _fabricate(L, exp, t)
    assert append_new_steps(L, exp) == [0, 1, 2]
    diag = json.loads(Path(L.diag(exp, 2)).read_text())
    diag["valid"]["logprob"] = -0.5
    _write(Path(L.diag(exp, 2)), diag)
    assert append_new_steps(L, exp) == [2]
    events = read_events(L.tensorboard_events(exp))
    assert [e.step for e in events if e.scalars] == [0, 1, 2]
    assert events[-1].scalars["valid/logprob"] == -0.5
    assert sum(e.file_version is not None for e in events) == 1
