"""decode_split with ``determinize_lattice``: the archives hold determinised CompactLattices
(Kaldi's text form, transition-id strings, one arc per word from a state) whose best path
at every scoring setting is the raw lattice's when that is within the beam, at f = 1 and
at a low frame rate (the determinisation at the search's scale, the acoustic costs × f
after it). The graph is a phone loop (every phone a word: the determinised lattice is no
smaller), searched with a random network at a narrow lattice beam."""

import gzip
import json
from collections import Counter

import pytest
from test_low_frame_rate import _write_set, phone_graph, tdnn  # noqa: F401 (a fixture)

from paravg.decode.decoder import decode_split
from paravg.decode.lattice import LatticeArchives
from paravg.decode.search import SearchOptions
from paravg.io import save_torch_atomic
from paravg.nnet.model_file import model_to_file_dict

SETTINGS = ([7.0, 10.0, 17.0], [0.0, 1.0])


def _decode(tmp_path, model, name, determinize):
    path = tmp_path / f"{name}.pt"
    save_torch_atomic(path, model_to_file_dict(model))
    lat = tmp_path / f"{name}.{determinize}.lat.gz"
    opts = SearchOptions(
        beam=12.0, lattice_beam=2.0, determinize_lattice=determinize, determinize_beam=None
    )
    out = tmp_path / f"{name}.{determinize}.json"
    decode_split(path, {"words": tmp_path / "graph"}, tmp_path / "feats.scp", out,
                 {"words": lat}, 1, 0, opts)  # fmt: skip
    return json.loads(out.read_text()), dict(LatticeArchives([lat])), lat


def _entries(path):
    """Per key, the arc lines (src, word) of the archive's text."""
    out, key = {}, None
    with gzip.open(path, "rt") as fh:
        lines = fh.read().splitlines()
    for line in lines:
        fields = line.split()
        if len(fields) == 1:
            key = fields[0]
            out[key] = []
        elif len(fields) == 4:
            out[key].append((fields[0], fields[2]))
    return out


@pytest.mark.parametrize("f", [1, 3])
def test_determinised_lattices_keep_every_settings_best_path(tmp_path, phone_graph, f):  # noqa: F811
    _write_set(tmp_path, {"u1": 40, "u2": 25, "u3": 33})
    model = tdnn(f, 0)
    info_raw, raw, _ = _decode(tmp_path, model, "m", False)
    info_det, det, path = _decode(tmp_path, model, "m", True)
    assert info_det["options"]["determinize_lattice"] is True
    assert info_det["options"]["determinize_beam"] is None
    # off, the options say so and leave out the unused beam
    assert info_raw["options"]["determinize_lattice"] is False
    assert "determinize_beam" not in info_raw["options"]
    assert info_det["determinize_seconds"] >= 0 and "determinize_seconds" not in info_raw
    assert info_raw["written_arcs_per_frame"] == info_raw["lattice_links_per_frame"]
    assert info_det["written_arcs_per_frame"]["words"] > 0
    with gzip.open(path, "rt") as fh:
        text = fh.read()
    assert "_" in text  # transition-id strings
    for key, arcs in _entries(path).items():
        assert all(c == 1 for c in Counter(arcs).values()), f"{key}: not deterministic"
        assert all(word != "0" for _, word in arcs), f"{key}: an epsilon arc"
    for u, lattice in raw.items():
        assert det[u].num_frames == lattice.num_frames
        want = lattice.best_paths(*SETTINGS)
        got = det[u].best_paths(*SETTINGS)
        # the determinisation's cost: graph + 0.1 x the lattice's acoustic (x f after it)
        best10 = lattice.backward_costs(lattice.graph + 0.1 * lattice.acoustic)[0]
        for (lmwt, wip), links in want.items():
            other = got[(lmwt, wip)]

            def cost(lat, ls, lmwt=lmwt, wip=wip):
                c = lat.graph[ls] + lat.acoustic[ls] / lmwt + wip * (lat.word[ls] > 0)
                return c.sum() + lat.final[lat.dst[ls[-1]]]

            at10 = cost(lattice, links, 10.0, 0.0)
            if at10 <= best10 + 2.0 - 1e-6:  # within the beam: kept, still the best
                assert cost(det[u], other) == pytest.approx(cost(lattice, links), abs=1e-3)
                words = lattice.word[links]
                assert list(det[u].word[other][det[u].word[other] > 0]) == list(words[words > 0])
            else:  # pruned away (Kaldi's too): a path of the determinised lattice is no better
                assert cost(det[u], other) >= cost(lattice, links) - 1e-3
