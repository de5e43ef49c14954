"""Rule score: the LMWT x WIP grid on the set's lattices; WER, PER and the CTM."""

from paravg.decode.score import GraphScoring, score_set
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
inp, out, params = snakemake.input, snakemake.output, snakemake.params
score_set(
    split_jsons=inp.splits,
    graphs={
        kind: GraphScoring(inp[f"lattices_{kind}"], directory, **params.grids[kind])
        for kind, directory in params.graph_dirs.items()
    },
    out_json=out.scores,
    details_dir=snakemake.params.decode_dir,
    hyps_json=out.hyps,
    ctm_path=out.ctm,
    text_path=params.text,
    targets_scp=params.targets,
    tuned_json=inp.get("tuned"),
    frame_shift=params.frame_shift,
    data_dir=params.data_dir,
    ctm_beam=params.ctm["beam"],
    ctm_decode_mbr=params.ctm["decode_mbr"],
)
