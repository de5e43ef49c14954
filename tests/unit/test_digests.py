"""Per-stage digests: the same bytes give the same digest wherever the workspace lies;
any changed byte, file name or timing-free JSON value changes it."""

from __future__ import annotations

import json
import shutil

import numpy as np

from paravg.digests import file_digest, stage_digest, write_digests


def make_run(ws):
    results = ws / "results"
    feats = results / "feats" / "test"
    feats.mkdir(parents=True)
    (feats / "feats.1.ark").write_bytes(bytes(range(256)))
    # scp files name the workspace's absolute path
    (feats / "feats.scp").write_text(f"u1 {ws}/results/feats/test/feats.1.ark:0\n")
    (results / "graph.json").write_text(json.dumps({"num_pdfs": 40, "build_seconds": 0.2}))
    return results


def test_the_same_run_in_another_directory_has_the_same_digests(tmp_path):
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "elsewhere" / "b")
    (b / "graph.json").write_text(json.dumps({"build_seconds": 9.9, "num_pdfs": 40}))
    for run, seconds in ((a, 1.5), (b, 2.5)):  # scores.json's decode timing
        (run / "scores.json").write_text(json.dumps({"wer": 39.0, "timing": {"s": seconds}}))
    assert stage_digest([a / "scores.json"], a) == stage_digest([b / "scores.json"], b)
    for stage in (["feats/test"], ["graph.json"]):
        assert stage_digest([a / p for p in stage], a) == stage_digest([b / p for p in stage], b)


def test_a_changed_byte_name_or_value_changes_the_digest(tmp_path):
    a = make_run(tmp_path / "a")
    base = stage_digest([a / "feats" / "test", a / "graph.json"], a)
    assert base["files"] == 3
    ark = a / "feats" / "test" / "feats.1.ark"
    data = bytearray(ark.read_bytes())
    data[7] ^= 1
    ark.write_bytes(bytes(data))
    assert stage_digest([a / "feats" / "test", a / "graph.json"], a) != base
    b = make_run(tmp_path / "b")
    shutil.move(b / "feats" / "test" / "feats.1.ark", b / "feats" / "test" / "feats.2.ark")
    assert stage_digest([b / "feats" / "test", b / "graph.json"], b) != base
    c = make_run(tmp_path / "c")
    (c / "graph.json").write_text(json.dumps({"num_pdfs": 41, "build_seconds": 0.2}))
    assert stage_digest([c / "feats" / "test", c / "graph.json"], c) != base


def test_an_egs_meta_digests_the_same_with_or_without_its_sha256_records(tmp_path):
    """The egs archives' meta.json records the sha256 of the archive's files (R5): those
    files are in the stage themselves, and the egs digest of the reference run holds."""
    from paravg.egs.archive import ArchiveMeta, EgsBatch, write_archive

    meta = ArchiveMeta(2, 1, 0, 0, 1, 0, "float32")
    ones = [[1.0]]
    batch = EgsBatch(
        np.array([ones, ones], "f4"),
        np.ones((2, 1), "i4"),
        np.ones((2, 1), "f4"),
        None,
        ["u-0", "u-1"],
    )
    write_archive(tmp_path / "egs" / "egs.0", batch, meta)
    meta_json = tmp_path / "egs" / "egs.0.meta.json"
    with_records = stage_digest([tmp_path / "egs"], tmp_path)
    assert "sha256" in json.loads(meta_json.read_text())
    meta_json.write_text(json.dumps(meta.with_num_egs(2).to_dict(), indent=2) + "\n")
    assert stage_digest([tmp_path / "egs"], tmp_path) == with_records


def test_file_digest_writes_the_workspace_as_ws(tmp_path):
    import hashlib

    results = make_run(tmp_path)
    scp = results / "feats" / "test" / "feats.scp"
    expected = hashlib.sha256(b"u1 <ws>/results/feats/test/feats.1.ark:0\n").hexdigest()
    assert file_digest(scp, tmp_path) == expected


def test_write_digests_writes_json_and_a_table(tmp_path, monkeypatch):
    results = make_run(tmp_path)
    stages = {"features/test": [results / "feats" / "test"], "missing": [results / "nope"]}
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Haswell")
    monkeypatch.setenv("NPY_DISABLE_CPU_FEATURES", "X86_V4 AVX512_ICL")
    monkeypatch.delenv("MKL_CBWR", raising=False)
    monkeypatch.delenv("NPY_ENABLE_CPU_FEATURES", raising=False)
    digests = write_digests(stages, results, results / "d.json", results / "d.md")
    written = json.loads((results / "d.json").read_text())
    assert written["stages"] == digests
    assert written["cpu_kernels"]["ATEN_CPU_CAPABILITY"] == "avx2"
    assert written["cpu_kernels"]["MKL_CBWR"] == ""
    assert written["cpu_kernels"]["OPENBLAS_CORETYPE"] == "Haswell"  # numpy's BLAS too
    assert written["cpu_kernels"]["NPY_DISABLE_CPU_FEATURES"] == "X86_V4 AVX512_ICL"
    assert "NPY_DISABLE_CPU_FEATURES='X86_V4 AVX512_ICL'" in (results / "d.md").read_text()
    assert (
        "CPU kernels: ATEN_CPU_CAPABILITY=avx2 MKL_CBWR=(unset)" in (results / "d.md").read_text()
    )
    assert digests["missing"]["files"] == 0
    table = (results / "d.md").read_text().splitlines()
    assert table[0] == "| stage | files | sha256 (first 16 hex digits) |"
    assert table[2] == f"| features/test | 2 | `{digests['features/test']['sha256'][:16]}` |"
