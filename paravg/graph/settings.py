"""Cross-key checks of the ``graph`` and ``decode`` config sections (the schema checks
each key; these check that the keys a source needs are given, and name the key)."""

from __future__ import annotations

from pathlib import Path

from paravg.config import uses_demo
from paravg.decode.options import check_search_options
from paravg.errors import ConfigError

REQUIRED = {
    "demo": (),
    "lang": ("lang_dir", "lm", "final_mdl"),
    "hclg": ("hclg_dir", "final_mdl"),
}


def check_recognition_config(config: dict) -> None:
    """Raise :class:`ConfigError` naming the missing or inconsistent key."""
    graph, decode = config["graph"], config["decode"]
    source = graph["source"]
    missing = [k for k in REQUIRED[source] if not graph.get(k)]
    if missing:
        raise ConfigError(f"graph.source {source} needs graph.{', graph.'.join(missing)}")
    for prefix in ("", "per_"):
        if decode[f"{prefix}lmwt_min"] > decode[f"{prefix}lmwt_max"]:
            raise ConfigError(
                f"decode.{prefix}lmwt_min ({decode[f'{prefix}lmwt_min']}) must not exceed "
                f"decode.{prefix}lmwt_max ({decode[f'{prefix}lmwt_max']})"
            )
    for name in ("decode", "export"):
        check_search_options(config[name], name)
    tune = decode["tune_set"]
    if tune and tune not in config["eval_sets"] and decoding_enabled(config)[0]:
        raise ConfigError(
            f"decode.tune_set {tune!r} is not in eval_sets {config['eval_sets']}: name the "
            "eval set whose best LMWT and WIP every set is scored with, or null to score "
            "each set at its own best"
        )
    source = (config["data"]["sets"] or {}).get(tune) if tune else None
    if source and Path(source).is_dir() and not (Path(source) / "text").is_file():
        raise ConfigError(
            f"decode.tune_set {tune!r}: {Path(source) / 'text'} does not exist; the set whose "
            "scores choose LMWT and WIP for every set needs transcripts"
        )


def decoding_enabled(config: dict) -> tuple[bool, str | None]:
    """Whether the run decodes, and why not when it does not. With ``data.targets: gmm``
    the word graph is the GMM stage's (its lang, tree and triphone transition model, G
    from the training text: paravg.gmm.graph), built for ``graph.source: demo`` on any
    training set. The demo graph is made of the
    demo corpus's training words: with your own training set (``data.sets`` names
    ``data.train_set``) and ``graph.source: demo`` the run trains and evaluates frame
    accuracy but does not decode, and says so. Sets added beside the demo corpus's
    (``data.sets`` without the training set) are decoded on the demo graph."""
    if not config["decode"]["enabled"]:
        return False, None
    if config["data"].get("targets") == "gmm":
        if config["graph"]["source"] == "demo":  # the GMM graph of the training text
            return True, None
        return False, (
            f"paravg: not decoding: data.targets gmm decodes with the GMM stage's own graph "
            f"(graph.source: demo), not graph.source {config['graph']['source']}'s model "
            "(its pdfs are not the tree's); decode.enabled: false to silence this"
        )
    if config["graph"]["source"] == "demo" and not uses_demo(config):
        return False, (
            "paravg: not decoding: graph.source demo is the demo corpus's graph; for a WER on "
            "your data set graph.source: lang (lang_dir, lm, final_mdl) or hclg (hclg_dir, "
            "final_mdl), or decode.enabled: false to silence this"
        )
    return True, None
