"""The plan's fingerprint chain, memoised on disk: a cluster job does not rebuild it.

The chain of :mod:`paravg.plan` is f_0 = H(model config, egs, srand) and
f_{t+1} = H(f_t, the params of the N_t jobs of iteration t, the sync settings). Each link
needs the one before it, so f_t costs O(t · N) job params and JSON to hash: 1.6 CPU-s at
1,000 iterations × 128 jobs. Every cluster job's own snakemake needs two links of it (the
f_{t+1} its job records, the f_t its inputs must carry) and the main snakemake checks the
newest recorded one. The chain is a pure function of what the plan is built from and of
the code that turns that into job params, so the first process that computes it (the
main snakemake, at parse time, before it submits any job) writes it to

    <directory>/<experiment>.<key>.json        (a JSON list of T + 1 digests)

where ``key`` hashes

* everything an :class:`~paravg.plan.ExperimentPlan` is built from: the experiment's
  resolved config, the egs geometry, the layout, the combination and ``simulate``
  settings, and the plan's class;
* the source of every module of the ``paravg`` package: a code change that alters a
  job's params is a new key (one missed recomputation, never a stale chain);

and every later process with the same key reads it: T digests, no job params. A process
checks each link it uses against one recomputed step (O(N_t): :meth:`ExperimentPlan.
fingerprint`), so a memo that disagrees with the plan is recomputed and replaced.

Kaldi has no such chain: its ``train_dnn.py`` checks nothing when it resumes at
``--stage``. The memo is the price of that check at Kaldi scale.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent


@lru_cache(maxsize=1)
def source_digest() -> str:
    """A digest of every ``.py`` file of the paravg package (path and bytes, sorted)."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE)).encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()[:20]


def memo_path(directory: str, experiment: str, key: str) -> str:
    return os.path.join(directory, f"{experiment}.{key}.json")


def read_chain(path: str, length: int) -> list[str] | None:
    """The memoised chain at ``path`` if it is there, readable and ``length`` long."""
    try:
        with open(path) as f:
            chain = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(chain, list) or len(chain) != length:
        return None
    if not all(isinstance(f, str) for f in chain):
        return None
    return chain


def write_chain(directory: str, experiment: str, key: str, chain: list[str]) -> None:
    """Write the chain atomically (a reader sees no file or a whole one) and remove the
    experiment's memos of other keys (an older config or code). A directory that cannot
    be written to only costs the next process the recomputation."""
    path = memo_path(directory, experiment, key)
    other_key = re.compile(re.escape(experiment) + r"\.[0-9a-f]+\.json")
    try:
        os.makedirs(directory, exist_ok=True)
        tmp = os.path.join(directory, f".chain.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        with open(tmp, "x") as f:  # the umask's permissions, as Snakemake's own files
            json.dump(chain, f)
        os.replace(tmp, path)
        for name in os.listdir(directory):
            if other_key.fullmatch(name) and name != os.path.basename(path):
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(directory, name))
    except OSError:
        pass
