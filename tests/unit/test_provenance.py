"""Model files carry their producer's checksum; a damaged one stops its reader with the way out."""

import json
from pathlib import Path

import pytest
import torch

from paravg.errors import ModelFileError
from paravg.io import save_torch_atomic, write_json_atomic
from paravg.layout import Layout
from paravg.nnet.model_file import MODEL_FORMAT, load_model_file
from paravg.provenance import MODEL_RECORDS, checksums, model_producer, record_of
from paravg.sync.nodes import NODE_KINDS, kinds

L = Layout("results")


@pytest.mark.parametrize(
    ("path", "rule", "record", "key"),
    [
        (L.init_model("a"), "init_model", L.init_stats("a"), "0.pt"),
        (L.job_model("a", 5, 2), "train_job", L.job_stats("a", 5, 2), "5/job2.pt"),
        (L.job_start("a", 5, 2), "train_job_keep_start", L.job_stats("a", 5, 2), "5/job2.start.pt"),
        (L.model("a", 7), "average", L.sync_summary("a", 7), "7.pt"),
        (L.bmuf_delta("a", 7), "bmuf", L.sync_summary("a", 7), "bmuf/7.delta.pt"),
        (L.consensus_model("a", 7), "consensus", L.consensus_summary("a", 7), "consensus/7.pt"),
        (L.ema_model("a", 7), "ema", None, "ema/7.pt"),
        (L.combined_model("a"), "combine", L.combine_summary("a"), "combined.pt"),
        (L.final_model("a"), "priors", L.final_summary("a"), "final.pt"),
    ],
)
def test_every_model_file_names_its_producer(path, rule, record, key):
    producer = model_producer(path)
    assert (producer.rule, producer.record, producer.key) == (rule, record, key)
    assert model_producer("/abs/" + path).record == (record and "/abs/" + record)
    assert model_producer(L.egs_info()) is None


def test_a_record_without_rule_names_the_rule_an_older_paravg_had(tmp_path):
    """A finished run of paravg before records named their writer: <t>.pt was written by
    average or by bmuf, bmuf when its block state of the same index exists."""
    layout = Layout(str(tmp_path))
    Path(layout.sync_summary("a", 7)).parent.mkdir(parents=True)
    Path(layout.sync_summary("a", 7)).write_text(json.dumps({"sha256": {"7.pt": "0" * 64}}))
    assert model_producer(layout.model("a", 7)).rule == "average"
    for path in (layout.bmuf_global("a", 7), layout.bmuf_delta("a", 7)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"")
    assert model_producer(layout.model("a", 7)).rule == "bmuf"
    assert model_producer(layout.model("a", 8)).rule == "average"


def test_the_rule_a_record_names_is_the_producer(tmp_path):
    """A record that names its writer is believed, whatever files lie beside it."""
    layout = Layout(str(tmp_path))
    for path in (layout.bmuf_global("a", 7), layout.bmuf_delta("a", 7)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"")
    Path(layout.sync_summary("a", 7)).parent.mkdir(parents=True)
    Path(layout.sync_summary("a", 7)).write_text(json.dumps(record_of("average", {})))
    assert model_producer(layout.model("a", 7)).rule == "average"
    Path(layout.job_stats("a", 3, 1)).parent.mkdir(parents=True)
    Path(layout.job_stats("a", 3, 1)).write_text(json.dumps(record_of("train_job_keep_start", {})))
    assert model_producer(layout.job_model("a", 3, 1)).rule == "train_job_keep_start"


def test_every_sync_node_model_is_recorded_in_its_summary():
    """MODEL_RECORDS (provenance's path fact) agrees with the per-index node kinds'
    outputs (a per-job node's start has its record beside it: the test below)."""
    for node in kinds(per_job=False):
        for kind in node.model_kinds:
            assert MODEL_RECORDS[kind] == node.summary_kind, (node.name, kind)


@pytest.mark.parametrize("kind", sorted(k.name for k in kinds(per_job=False)))
def test_every_sync_node_records_its_rule(tmp_path, kind):
    """run_node's files name the node kind's rule in its summary, and a reader of its
    model finds that rule there."""
    from paravg.sync.nodes import run_node

    lay = Layout(str(tmp_path / "results"))
    header = {"format": MODEL_FORMAT, "model": {}, "meta": {}}
    save_torch_atomic(lay.init_model("x"), {**header, "state_dict": {"w": torch.zeros(4)}})
    files = {"models": [], "stats": []}
    for j in range(2):
        path = lay.job_model("x", 2, j)
        save_torch_atomic(path, {**header, "state_dict": {"w": torch.full((4,), float(j))}})
        write_json_atomic(lay.job_stats("x", 2, j), {"objf": -1.0, "plan": {"fingerprint": "f"}})
        files["models"].append(path)
        files["stats"].append(lay.job_stats("x", 2, j))
    files |= {"global": [lay.init_model("x")], "delta": [], "start": [lay.init_model("x")]}
    sync = {"objf_threshold": 1.0, "bmuf": {"block_momentum": 0.5, "block_lr": 1.0,
                                             "nesterov": True}}  # fmt: skip
    outputs = {role: getattr(lay, k)("x", 2) for role, k in NODE_KINDS[kind].outputs}
    node = {"iteration": 1, "sync": sync, "files": files, "fingerprint": "f"}
    run_node(kind, node, outputs)
    assert json.loads(Path(outputs["summary"]).read_text())["rule"] == kind
    for role, _ in NODE_KINDS[kind].outputs[:-1]:
        assert model_producer(outputs[role]).rule == kind, role
        assert load_model_file(outputs[role])  # its record's sha256 matches


def test_a_delay_by_one_start_names_its_mix_node_and_is_checked_against_its_record(tmp_path):
    """delay-by-one's <t>/job<j>.start.pt is written by its mix node, with the sha256 in
    <t>/job<j>.start.json: a changed file stops its reader, naming that rule."""
    from paravg.sync.nodes import run_node

    lay = Layout(str(tmp_path / "results"))
    init = {"format": MODEL_FORMAT, "state_dict": {"w": torch.ones(8)}, "meta": {}}
    save_torch_atomic(lay.init_model("x"), init)
    outputs = {"model": lay.job_start("x", 2, 0), "record": lay.job_start_record("x", 2, 0)}
    # the mix node of the node table, as its rule runs it (params: its MixRule's)
    params = {
        "iteration": 1,
        "files": {"models": [lay.init_model("x")] * 3},
        "sync": {"objf_threshold": 1.0},
        "fingerprints": {"own": "f1", "inputs": None},
    }
    run_node("mix_node", params, outputs)  # fmt: skip
    record = json.loads(Path(outputs["record"]).read_text())
    assert record["plan"] == {"fingerprint": "f1", "sync": {"objf_threshold": 1.0}}
    producer = model_producer(outputs["model"])
    assert (producer.rule, producer.record) == ("mix_node", outputs["record"])
    assert json.loads(Path(outputs["record"]).read_text())["rule"] == "mix_node"
    assert torch.equal(load_model_file(outputs["model"])["state_dict"]["w"], torch.ones(8))
    data = Path(outputs["model"]).read_bytes()
    Path(outputs["model"]).write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    with pytest.raises(ModelFileError, match="rule mix_node recorded"):
        load_model_file(outputs["model"])


@pytest.fixture
def job_model(tmp_path):
    """A job model written as train_job writes it: the file, then its JSON with the sha256."""
    lay = Layout(str(tmp_path / "results"))
    path = lay.job_model("x", 3, 1)
    file_dict = {"format": MODEL_FORMAT, "state_dict": {"w": torch.zeros(256)}, "meta": {}}
    write_json_atomic(
        lay.job_stats("x", 3, 1), {"sha256": checksums({path: save_torch_atomic(path, file_dict)})}
    )
    return path


def test_an_intact_model_loads(job_model):
    assert torch.equal(load_model_file(job_model)["state_dict"]["w"], torch.zeros(256))


def test_a_changed_byte_that_still_unpickles_is_caught_by_the_checksum(job_model):
    data = bytearray(Path(job_model).read_bytes())
    at = bytes(data).index(b"\x00" * 1024)  # inside the stored zeros
    data[at + 1] = 0x3F  # a small finite float: torch.load alone would accept it
    Path(job_model).write_bytes(bytes(data))
    with pytest.raises(ModelFileError) as err:
        load_model_file(job_model)
    text = str(err.value)
    assert "differ from what rule train_job recorded" in text
    assert f"rm {job_model}" in text and "snakemake <your options" in text
    assert text.splitlines()[-2].endswith(job_model)  # the rebuild command names the file


def test_a_truncated_model_names_the_rule_and_the_rebuild_commands(job_model):
    Path(job_model).write_bytes(Path(job_model).read_bytes()[:300])
    stats = Path(job_model.replace(".pt", ".json"))
    record = json.loads(stats.read_text())
    record.pop("sha256")  # an older run's JSON: only the reader's own checks remain
    stats.write_text(json.dumps(record))
    with pytest.raises(
        ModelFileError, match=r"not a readable model file(.|\n)*rule train_job(.|\n)*rm "
    ):
        load_model_file(job_model)


def test_the_plan_check_reads_the_statistics_or_the_node_summary(tmp_path, caplog):
    """A job refuses inputs another plan made, from each job's statistics or, when it
    starts from the node's <t>.pt, from the node's summary (which records the plan its
    inputs carried); a summary of an older paravg records none and is let through."""
    import json

    from paravg.errors import TrainingError
    from paravg.provenance import check_input_fingerprints

    def write(name, record):
        path = tmp_path / name
        path.write_text(json.dumps({"objf": -1.0, **record}))
        return str(path)

    ok = [write(f"job{j}.json", {"plan": {"fingerprint": "abc"}}) for j in range(3)]
    check_input_fingerprints(ok, "abc")
    other = write("job3.json", {"plan": {"fingerprint": "xyz"}})
    with pytest.raises(TrainingError, match=r"job3\.json was made by another plan"):
        check_input_fingerprints([*ok, other], "abc")
    summary = write("2.json", {"plan": {"fingerprint": "abc"}})
    check_input_fingerprints([summary], "abc", unrecorded_ok=True)
    with pytest.raises(TrainingError, match=r"2\.json was made by another plan"):
        check_input_fingerprints([summary], "xyz", unrecorded_ok=True)
    legacy = write("1.json", {})
    with pytest.raises(TrainingError, match="another plan"):
        check_input_fingerprints([legacy], "abc")
    check_input_fingerprints([legacy], "abc", unrecorded_ok=True)
    assert "records no plan" in caplog.text
