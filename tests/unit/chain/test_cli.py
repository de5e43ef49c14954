"""``python -m paravg.chain``: topology, phone LM, den FST and info from files."""

import subprocess
import sys

from paravg.chain.__main__ import main
from paravg.chain.fst_arrays import fst_to_arrays


def test_gen_topo_est_phone_lm_make_den_fst_and_info(tmp_path, capsys):
    assert main(["gen-topo", "2:3", "1"]) == 0
    topo = capsys.readouterr().out
    assert "<ForwardPdfClass> 0 <SelfLoopPdfClass> 1" in topo
    (tmp_path / "topo").write_text(topo)
    (tmp_path / "phones.txt").write_text("u1 1 2 3 1\nu2 2 3 2 1 1\nu3 3 3 1 2\n\nu4 1 2 3\n")
    lm, den, norm = (str(tmp_path / n) for n in ("lm.fst", "den.fst", "norm.fst"))
    assert (
        main(["est-phone-lm", "--num-extra-lm-states", "0", str(tmp_path / "phones.txt"), lm]) == 0
    )
    assert "Created phone language model" in capsys.readouterr().out
    assert main(["make-den-fst", str(tmp_path / "topo"), lm, den, norm]) == 0
    out = capsys.readouterr().out
    assert "make-den-fst: 6 pdfs" in out
    import kaldifst

    a = fst_to_arrays(kaldifst.StdVectorFst.read(den))
    assert a.ilabel.min() >= 1 and a.ilabel.max() <= 6
    assert main(["info", den, "--num-pdfs", "6"]) == 0
    info = dict(line.split(" ", 1) for line in capsys.readouterr().out.splitlines())
    assert info["num-states"] == str(a.num_states) and info["pdfs-not-seen"] == "0"
    assert info["acceptor"] == "True"


def test_bad_inputs_name_the_file(tmp_path, capsys):
    bad = tmp_path / "phones.txt"
    bad.write_text("u1 1 x 2\n")
    assert main(["est-phone-lm", str(bad), str(tmp_path / "lm.fst")]) == 1
    assert "phones.txt:1" in capsys.readouterr().err
    assert main(["info", str(tmp_path / "nothing.fst")]) == 1
    assert "nothing.fst: FST file does not exist" in capsys.readouterr().err


def test_runs_as_a_module():
    proc = subprocess.run(
        [sys.executable, "-m", "paravg.chain", "gen-topo", "4:5", "1:2:3"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "<ForPhones>\n1 2 3 4 5\n</ForPhones>" in proc.stdout
