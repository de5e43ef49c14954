"""The files of a chain supervision table: one ``<archive>.chain.<field>.npy`` per field
(:class:`paravg.chain.egs.SupervisionTable`'s arrays). Named here, apart from the table's
code, so that the DAG can name the files without importing kaldifst."""

from __future__ import annotations

import os

#: The arrays of a :class:`~paravg.chain.egs.SupervisionTable`, in its field order.
TABLE_FIELDS = (
    "state_offsets",
    "arc_offsets",
    "frames",
    "start",
    "arc_src",
    "arc_dst",
    "arc_pdf",
    "arc_frame",
    "arc_logp",
    "final_logp",
)


def table_files(prefix: str | os.PathLike) -> dict[str, str]:
    """Field -> file of the supervision table of archive ``prefix``."""
    return {name: f"{prefix}.chain.{name}.npy" for name in TABLE_FIELDS}
