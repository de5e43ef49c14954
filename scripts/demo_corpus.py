"""Rule demo_corpus: synthesize the labelled demo corpus (paravg.corpus.build)."""

import logging
import os

from paravg.corpus import build_demo_corpus
from paravg.logs import report_resources_at_exit


def main(snakemake) -> None:
    logging.basicConfig(
        filename=snakemake.log[0],
        filemode="w",
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    report_resources_at_exit()
    params = snakemake.params
    out_dir = os.path.dirname(snakemake.output.done)
    try:
        build_demo_corpus(
            out_dir=out_dir,
            minutes=params.minutes,
            test_fraction=params.test_fraction,
            dev_fraction=params.dev_fraction,
            variants=params.variants,
            use_espeak=params.use_espeak,
            seed=params.seed,
            num_workers=snakemake.threads,
        )
    except Exception:
        logging.exception("building the demo corpus in %s failed", out_dir)
        raise


# The guard matters: the worker processes (spawn) import this file again as __mp_main__.
if __name__ == "__main__":
    main(snakemake)
