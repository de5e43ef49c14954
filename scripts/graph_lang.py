"""Rule graph_lang: HCLG from a user's lang dir + G.fst/ARPA + final.mdl (+ tree)."""

from paravg.graph.hclg import GraphOptions
from paravg.graph.user import build_from_lang
from paravg.logs import setup_logging

setup_logging(snakemake.log[0])
build_from_lang(
    lang_dir=snakemake.params.lang_dir,
    lm=snakemake.input.lm,
    final_mdl=snakemake.input.final_mdl,
    tree=snakemake.input.get("tree"),
    out_dir=snakemake.params.out_dir,
    options=GraphOptions(**snakemake.params.options),
)
