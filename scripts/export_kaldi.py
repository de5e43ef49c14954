"""Rule export_kaldi: final.pt (+ i-vector system, graph) -> results/exp/<exp>/kaldi/."""

from paravg.export.stage import export_experiment
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
inp = snakemake.input
ivectors = (
    {"pca": inp.pca, "ubm": inp.ubm, "extractor": inp.extractor} if hasattr(inp, "pca") else None
)
export_experiment(
    model=inp.model,
    out_dir=snakemake.output.kaldi,
    features=snakemake.params.features,
    sample_rate=snakemake.params.sample_rate,
    ivector_files=ivectors,
    ivector_options=snakemake.params.ivector_options,
    graph_dir=snakemake.params.graph_dir,
    decoder=snakemake.params.decoder,
    acoustic_scale=snakemake.params.acoustic_scale,
)
