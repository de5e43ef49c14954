"""The GMM stage's paths and switch that the other stages read (``data.targets: gmm``):
where each set's targets dir and the tree's number of pdfs are, and whether existing egs
were made of other targets. No import of the stages (paravg.dag.core reads it)."""

from __future__ import annotations

from pathlib import Path


def uses_gmm(config: dict) -> bool:
    """The run makes its targets with the GMM stages (``data.targets: gmm``)."""
    return config["data"].get("targets", "data") == "gmm"


def gmm_root(results: str) -> str:
    return f"{results}/gmm"


def num_pdfs_file(results: str) -> str:
    """The tree's number of pdfs: the network's output dimension (the egs plan reads it)."""
    return f"{gmm_root(results)}/tri/num_pdfs"


def egs_of_other_targets(config: dict, info: dict) -> list[str]:
    """``["num_targets"]`` when existing egs were not made of the GMM tree's targets (a
    run switched to ``data.targets: gmm``, or a tree of another size): they are rebuilt
    and the plans wait for them, as for egs of other options (RunCore.stale_egs)."""
    if not uses_gmm(config):
        return []
    pdfs = Path(num_pdfs_file(config["results"]))
    if pdfs.is_file() and pdfs.read_text().strip() == str(info.get("num_targets")):
        return []
    return ["num_targets"]


def targets_dir(results: str, set_: str) -> str:
    """The Kaldi data dir ``gmm_targets`` writes for ``set_`` (its tables + targets.ark)."""
    return f"{gmm_root(results)}/data/{set_}"


def targets_dir_files(results: str, set_: str) -> list[str]:
    """What ``gmm_targets`` declares (the inputs of the set's ``prepare_data``)."""
    return [f"{targets_dir(results, set_)}/{n}" for n in ("wav.scp", "utt2spk", "targets.ark")]


def lang_dir(results: str) -> str:
    """The GMM stage's lang dir (``prepare_lang.sh``; the chain lang's phones)."""
    return f"{gmm_root(results)}/lang"


#: the lang files the chain stage reads (its phones, sets, roots, the context-independent
#: ones; ``phones/extra_questions.int``, written by the same rule, when it is there)
CHAIN_LANG_FILES = ("phones.txt", "phones/sets.int", "phones/roots.int",
                    "phones/context_indep.csl")  # fmt: skip


def phones_files(results: str, set_: str) -> dict[str, str]:
    """``ali-to-phones --per-frame`` of ``set_``'s final alignment (rule ``gmm_phones``,
    the chain stage's frame labels): ``ark`` and ``scp``."""
    d = f"{gmm_root(results)}/phones/{set_}"
    return {"ark": f"{d}/phones.ark", "scp": f"{d}/phones.scp"}
