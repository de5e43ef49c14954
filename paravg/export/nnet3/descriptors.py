"""nnet3 config lines and descriptors as text: printed as Kaldi prints them, and parsed.

A descriptor says what a node reads (``Append(Offset(input, -1), input)``, ``Sum(Scale(0.66,
x), y)``, ``IfDefined(Offset(r, -3))``, ``ReplaceIndex(ivector, t, 0)``). Mirrors
kaldi-asr/kaldi ``src/nnet3/nnet-descriptor.cc`` (``Descriptor::WriteConfig``, the parser)
and the ``key=value`` lines of ``nnet-nnet.cc`` (``Nnet::GetConfigLines``). The parsed
tree is what :mod:`.network` sizes and :mod:`.compute` evaluates.
"""

from __future__ import annotations

import re

import numpy as np

from paravg.errors import ModelFileError


# ---------------------------------------------------------------------- printing
def offsets(node: str, times: list[int]) -> list[str]:
    """``node`` at each time offset: ``node`` for 0, ``Offset(node, o)`` otherwise."""
    return [node if o == 0 else f"Offset({node}, {o})" for o in times]


def append(parts: list[str]) -> str:
    """``Append(a, b, ...)``, or the one part alone."""
    return parts[0] if len(parts) == 1 else "Append(" + ", ".join(parts) + ")"


def scale_text(scale: float) -> str:
    """A ``Scale()`` factor as Kaldi's ``Descriptor::WriteConfig`` prints it (a float
    with C++'s default 6 significant digits), or with all the digits a float needs
    where 6 would change it."""
    short = f"{float(np.float32(scale)):.6g}"
    if np.float32(float(short)) == np.float32(scale):
        return short
    return f"{float(np.float32(scale)):.9g}"


# ---------------------------------------------------------------------- parsing
def config_values(line: str) -> dict[str, str]:
    """``key=value`` pairs of a config line; spaces inside parentheses (descriptors such
    as ``Append(input, Offset(input, 1))``) do not split."""
    tokens, depth, cur = [], 0, ""
    for ch in line.strip() + " ":
        if ch.isspace() and depth == 0:
            if cur:
                tokens.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    return dict(tok.split("=", 1) for tok in tokens[1:] if "=" in tok)


def _split_args(s: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    parts.append(cur.strip())
    return parts


def parse_descriptor(s: str):
    """A descriptor as a tree: ('node', name) | ('offset', d, o) | ('append', [d...]) |
    ('replace_t', d, value) | ('sum', [d...]) | ('scale', factor, d) |
    ('ifdefined', d)."""
    s = s.strip()
    m = re.fullmatch(r"(\w+)\((.*)\)", s)
    if not m:
        return ("node", s)
    fn, args = m.group(1), _split_args(m.group(2))
    if fn == "Append":
        return ("append", [parse_descriptor(a) for a in args])
    if fn == "Sum" and len(args) >= 2:
        return ("sum", [parse_descriptor(a) for a in args])
    if fn == "Scale" and len(args) == 2:
        return ("scale", float(args[0]), parse_descriptor(args[1]))
    if fn == "Offset" and len(args) == 2:
        return ("offset", parse_descriptor(args[0]), int(args[1]))
    if fn == "ReplaceIndex" and len(args) == 3 and args[1] == "t":
        return ("replace_t", parse_descriptor(args[0]), int(args[2]))
    if fn == "IfDefined" and len(args) == 1:
        return ("ifdefined", parse_descriptor(args[0]))
    raise ModelFileError(
        f"descriptor {s!r}: only Append, Sum, Scale, Offset, ReplaceIndex(x, t, n), IfDefined"
    )


def tree_edges(t, offset: int = 0, optional: bool = False):
    """(node, time offset or None for a fixed time, inside IfDefined) of every node a
    descriptor tree reads at time t: the node at t + offset."""
    kind = t[0]
    if kind == "node":
        yield t[1], offset, optional
    elif kind == "offset":
        yield from tree_edges(t[1], offset + t[2], optional)
    elif kind == "replace_t":
        for name, _o, opt in tree_edges(t[1], 0, optional):
            yield name, None, opt
    elif kind == "ifdefined":
        yield from tree_edges(t[1], offset, True)
    elif kind == "scale":
        yield from tree_edges(t[2], offset, optional)
    else:
        for a in t[1]:
            yield from tree_edges(a, offset, optional)
