"""The export's manifest (export.json ``files``) and ``python -m paravg.export --verify``:
a damaged or incomplete export is named before vosk meets it (issue 23, B6)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from paravg.corpus.phones import PHONES
from paravg.errors import ModelFileError
from paravg.export.layout import IvectorSystem, export_model
from paravg.export.manifest import digest_problems, file_digests, stat_problems, verify_export
from paravg.export.phone_loop import monophone_transition_model, write_phone_loop_graph
from paravg.features import MfccOptions


@pytest.fixture
def exported(tmp_path, model_file, ivector_files):
    tm = monophone_transition_model(40)[1]
    graph = write_phone_loop_graph(tm, list(PHONES[:40]), tmp_path / "graph", 2.0)
    out = tmp_path / "kaldi"
    export_model(model_file[0], out, tm, MfccOptions(), graph, IvectorSystem(*ivector_files))
    return out


def test_the_manifest_lists_every_file_with_its_size_and_digest(exported):
    files = json.loads((exported / "export.json").read_text())["files"]
    on_disk = sorted(p.relative_to(exported).as_posix() for p in exported.rglob("*") if p.is_file())
    assert sorted(files) == [f for f in on_disk if f != "export.json"]
    assert {"conf/model.conf", "ivector/final.ie", "am/final.mdl", "graph/HCLG.fst"} <= set(files)
    assert files == file_digests(exported)
    assert files["am/final.mdl"]["bytes"] == (exported / "am/final.mdl").stat().st_size
    assert stat_problems(exported) == [] and digest_problems(exported) == []


def test_snakemakes_marker_in_the_directory_output_is_not_the_exports(exported):
    """Snakemake writes ``.snakemake_timestamp`` into the directory output
    ``results/exp/<e>/kaldi`` after the job: ``--verify`` reported every pipeline export as
    damaged ("not written by the export", R3). A file of any other name still is extra."""
    (exported / ".snakemake_timestamp").touch()
    assert digest_problems(exported) == []
    assert ".snakemake_timestamp" not in file_digests(exported)
    (exported / "conf" / ".snakemake_timestamp").touch()  # only Snakemake's, at the top
    assert digest_problems(exported) == [
        f"{exported / 'conf' / '.snakemake_timestamp'}: not written by the export"
    ]


@pytest.mark.parametrize("missing", ["conf/model.conf", "ivector/final.ie"])
def test_a_missing_file_is_named(exported, missing):
    """An export without conf/model.conf got "Nothing to be done" from paravg and "does not
    contain model files" from vosk; one without final.ie passed vosk.Model() and failed in
    the recogniser ("Ivector feature dimension mismatch: got -1")."""
    (exported / missing).unlink()
    assert stat_problems(exported) == [f"{exported / missing}: missing"]
    with pytest.raises(ModelFileError, match=rf"the export is damaged:\n  {exported / missing}"):
        verify_export(exported)


def test_changed_bytes_of_the_same_size_are_caught_by_the_digest(exported):
    mdl = exported / "am" / "final.mdl"
    data = bytearray(mdl.read_bytes())
    data[len(data) // 2] ^= 0x01
    mdl.write_bytes(bytes(data))
    assert stat_problems(exported) == []  # the cheap check cannot see it
    assert digest_problems(exported) == [f"{mdl}: its bytes differ from what the export wrote"]


def test_a_cut_short_file_and_a_missing_summary(exported):
    hclg = exported / "graph" / "HCLG.fst"
    hclg.write_bytes(hclg.read_bytes()[:100])
    assert stat_problems(exported)[0].startswith(f"{hclg}: 100 bytes, the export wrote")
    (exported / "export.json").unlink()
    assert stat_problems(exported) == [
        f"{exported / 'export.json'}: missing (the export is incomplete)"
    ]


def test_verify_command_loads_an_intact_export_in_vosk_and_names_a_damaged_one(exported):
    cmd = [sys.executable, "-m", "paravg.export", "--verify", str(exported)]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout)
    assert summary["files"] == len(file_digests(exported))
    assert set(summary["vosk_hypothesis"].split()) <= set(PHONES)  # vosk decoded with it
    (exported / "conf" / "model.conf").unlink()
    bad = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert bad.returncode == 1
    assert f"{exported / 'conf' / 'model.conf'}: missing" in bad.stderr


def test_a_run_stops_on_a_damaged_finished_export_with_the_rebuild_command(exported):
    """What the DAG checks before it takes a finished export as done (stat only)."""
    from paravg.export.manifest import check_finished_export

    check_finished_export(exported)  # intact: nothing to say
    check_finished_export(exported.parent / "not_exported_yet")
    (exported / "ivector" / "final.ie").unlink()
    with pytest.raises(ModelFileError, match=r"final\.ie: missing\nRebuild it with\n  rm -r "):
        check_finished_export(exported)
    summary = json.loads((exported / "export.json").read_text())
    del summary["files"]  # an export of a paravg before manifests: left alone
    (exported / "export.json").write_text(json.dumps(summary))
    check_finished_export(exported)
