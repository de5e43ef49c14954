"""Model files carry their producer's checksum; a damaged one stops its reader with the way out."""

import json
from pathlib import Path

import pytest
import torch

from paravg.errors import ModelFileError
from paravg.io import save_torch_atomic, write_json_atomic
from paravg.layout import Layout, model_producer
from paravg.nnet.model_file import MODEL_FORMAT, load_model_file
from paravg.provenance import checksums

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


def test_the_synced_model_of_a_bmuf_run_names_the_bmuf_node(tmp_path):
    """<t>.pt is written by average or by bmuf (the sync node kinds of
    paravg.sync.registry.NODE_KINDS): bmuf when its block state of the same index exists."""
    layout = Layout(str(tmp_path))
    assert model_producer(layout.model("a", 7)).rule == "average"
    for path in (layout.bmuf_global("a", 7), layout.bmuf_delta("a", 7)):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_bytes(b"")
    assert model_producer(layout.model("a", 7)).rule == "bmuf"
    assert model_producer(layout.model("a", 8)).rule == "average"


def test_a_delay_by_one_start_names_its_mix_node_and_is_checked_against_its_record(tmp_path):
    """delay-by-one's <t>/job<j>.start.pt is written by its mix node, with the sha256 in
    <t>/job<j>.start.json: a changed file stops its reader, naming that rule."""
    from paravg.sync.decentralized import mix_node

    lay = Layout(str(tmp_path / "results"))
    init = {"format": MODEL_FORMAT, "state_dict": {"w": torch.ones(8)}, "meta": {}}
    save_torch_atomic(lay.init_model("x"), init)
    outputs = {"model": lay.job_start("x", 2, 0), "record": lay.job_start_record("x", 2, 0)}
    mix_node({"models": [lay.init_model("x")] * 3}, 1, {"objf_threshold": 1.0}, outputs,
             {"own": "f1", "inputs": None})  # fmt: skip
    producer = model_producer(outputs["model"])
    assert (producer.rule, producer.record) == ("mix_node", outputs["record"])
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
