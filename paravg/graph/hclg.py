"""HCLG = H ∘ C ∘ L ∘ G, as Kaldi's ``utils/mkgraph.sh`` builds it.

Steps (Kaldi's binaries in brackets; kaldifst and kaldi-hmm-gmm wrap the same code):

1. LG = L_disambig ∘ G, determinised in the log semiring and minimised with labels and
   weights encoded [``fsttablecompose | fstdeterminizestar --use-log=true |
   fstminimizeencoded``]. (``fstpushspecial`` is not in kaldifst; it only moves weight
   towards the start and does not change any path's total weight.)
2. CLG = C ∘ LG with context width N and central position P (monophone: 1, 0)
   [``fstcomposecontext``]; its input labels index ``ilabel_info`` (phone windows).
3. H (without self-loops) from ilabel_info, the tree and the transition model with
   ``transition_scale`` (1.0) [``make-h-transducer``]; it returns the transition-id
   disambiguation symbols.
4. HCLGa = H ∘ CLG, determinised (log semiring), the transition-id disambiguation
   symbols replaced by epsilon [``fstrmsymbols``: kaldifst has none, so through the
   text form], minimised with encoding [``fstminimizeencoded``].
   (``fstrmepslocal``, a local epsilon clean-up, is not in kaldifst either.)
5. HCLG = HCLGa with self-loops added at ``self_loop_scale`` (0.1), reordered
   [``add-self-loops --self-loop-scale=0.1 --reorder=true``].

Input labels of HCLG are transition-ids (1-based), outputs word ids.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from paravg.errors import DataError
from paravg.io import atomic_path, write_json_atomic


@dataclass(frozen=True)
class GraphOptions:
    """Kaldi's mkgraph.sh options (defaults as there)."""

    transition_scale: float = 1.0
    self_loop_scale: float = 0.1
    context_width: int = 1
    central_position: int = 0


def read_fst(path: str | Path):
    """An OpenFst binary VectorFst (kaldifst), naming the file if it cannot be read."""
    import kaldifst

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: FST file does not exist")
    try:
        fst = kaldifst.StdVectorFst.read(str(path))
    except Exception as exc:
        raise DataError(f"{path}: not an OpenFst VectorFst ({exc})") from exc
    if fst is None:  # kaldifst's answer to a file cut short or not an FST at all
        raise DataError(
            f"{path}: cannot be read as an OpenFst VectorFst ({path.stat().st_size} bytes: "
            "cut short, or not an FST)"
        )
    return fst


def remove_input_symbols(fst, symbols: Sequence[int]):
    """``fstrmsymbols``: input labels in ``symbols`` become epsilon (via text form)."""
    import kaldifst

    drop = {str(s) for s in symbols}
    out = []
    for line in fst.to_str(show_weight_one=True).splitlines():
        fields = line.split("\t") if "\t" in line else line.split()
        if len(fields) >= 4 and fields[2] in drop:
            fields[2] = "0"
        out.append(" ".join(fields))
    return kaldifst.compile("\n".join(out) + "\n", acceptor=False)


def compose_lg(L, G):
    """det(min(L ∘ G)) in the log semiring."""
    import kaldifst

    kaldifst.arcsort(L, sort_type="olabel")
    kaldifst.arcsort(G, sort_type="ilabel")
    LG = kaldifst.compose(L, G)
    if kaldifst.determinize_star(LG, use_log=True):
        raise DataError("LG determinisation stopped early (max states)")
    kaldifst.minimize_encoded(LG)
    kaldifst.arcsort(LG, sort_type="ilabel")
    return LG


def make_hclg(L, G, disambig_phones: Sequence[int], tree, trans_model, opts: GraphOptions):
    """HCLG (self-loops added) and a summary of the sizes of the intermediate graphs."""
    import kaldi_hmm_gmm
    import kaldifst

    LG = compose_lg(L, G)
    CLG, ilabel_info = kaldifst.compose_context(
        disambig_syms=list(disambig_phones),
        context_width=opts.context_width,
        central_position=opts.central_position,
        ifst=LG,
    )
    kaldifst.arcsort(CLG, sort_type="ilabel")
    Ha, disambig_tids = kaldi_hmm_gmm.get_h_transducer(
        ilabel_info,
        tree,
        trans_model,
        kaldi_hmm_gmm.HTransducerConfig(transition_scale=opts.transition_scale),
    )
    kaldifst.arcsort(Ha, sort_type="olabel")
    HCLGa = kaldifst.compose(Ha, CLG)
    if kaldifst.determinize_star(HCLGa, use_log=True):
        raise DataError("HCLG determinisation stopped early (max states)")
    HCLGa = remove_input_symbols(HCLGa, disambig_tids)
    kaldifst.minimize_encoded(HCLGa)
    HCLG = kaldi_hmm_gmm.add_self_loops(
        self_loop_scale=opts.self_loop_scale,
        disambig_syms=[],
        reorder=True,
        trans_model=trans_model,
        ifst=HCLGa,
    )
    kaldifst.arcsort(HCLG, sort_type="ilabel")
    sizes = {
        "LG": [LG.num_states, _num_arcs(LG)],
        "CLG": [CLG.num_states, _num_arcs(CLG)],
        "HCLG": [HCLG.num_states, _num_arcs(HCLG)],
        "disambig_tids": len(disambig_tids),
    }
    return HCLG, sizes


def _num_arcs(fst) -> int:
    return sum(fst.num_arcs(s) for s in range(fst.num_states))


def write_graph(HCLG, out_fst: str | Path, summary: dict, summary_path: str | Path) -> None:
    """Write HCLG.fst (OpenFst binary) and a JSON summary, atomically."""
    with atomic_path(out_fst, suffix=".fst") as tmp:
        HCLG.write(str(tmp))
    write_json_atomic(summary_path, json.loads(json.dumps(summary)))
