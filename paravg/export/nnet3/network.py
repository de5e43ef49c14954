"""An nnet3 network: its config lines (the nodes) and components, its node graph, and
the file ``Nnet::Write`` writes and ``Nnet::Read`` reads.

Mirrors kaldi-asr/kaldi ``src/nnet3/nnet-nnet.cc``. File layout: token ``<Nnet3>``, a
newline, the config lines (text in both modes), an empty line, ``<NumComponents>`` N,
then per component ``<ComponentName> name <Type> ... </Type>``, then ``</Nnet3>``. The
components' fields: :mod:`.components`; the descriptors: :mod:`.descriptors`; running a
network: :mod:`.compute`.
"""

from __future__ import annotations

from dataclasses import dataclass

from paravg.errors import ModelFileError
from paravg.export.kaldi_stream import KaldiReader, KaldiWriter
from paravg.export.nnet3.components import Component, read_component, write_component
from paravg.export.nnet3.descriptors import config_values, parse_descriptor


@dataclass
class Nnet3:
    """A network: its config lines (nodes) and its components, in file order."""

    config_lines: list[str]
    components: list[Component]

    def component(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def input_dims(self) -> dict[str, int]:
        dims = {}
        for line in self.config_lines:
            kv = config_values(line)
            if line.startswith("input-node"):
                dims[kv["name"]] = int(kv["dim"])
        return dims

    def output_dim(self) -> int:
        """Dimension of the node ``output`` (the number of pdfs the net scores)."""
        for line in self.config_lines:
            kv = config_values(line)
            if line.startswith("output-node") and kv["name"] == "output":
                graph = Graph.of(self)
                return graph.tree_dim(self, parse_descriptor(kv["input"]))
        raise ModelFileError("the network has no output-node named 'output'")


@dataclass
class Graph:
    """The nodes of a network's config lines: input dims, component nodes (component
    name, descriptor tree), dim-range nodes (input node, offset, dim), in file order."""

    inputs: dict[str, int]
    components: dict[str, tuple[str, tuple]]
    dim_ranges: dict[str, tuple[str, int, int]]
    outputs: dict[str, tuple]

    @classmethod
    def of(cls, nnet: Nnet3) -> Graph:
        g = cls({}, {}, {}, {})
        for line in nnet.config_lines:
            kv = config_values(line)
            if line.startswith("input-node"):
                g.inputs[kv["name"]] = int(kv["dim"])
            elif line.startswith("component-node"):
                g.components[kv["name"]] = (kv["component"], parse_descriptor(kv["input"]))
            elif line.startswith("dim-range-node"):
                g.dim_ranges[kv["name"]] = (
                    kv["input-node"],
                    int(kv["dim-offset"]),
                    int(kv["dim"]),
                )
            elif line.startswith("output-node"):
                g.outputs[kv["name"]] = parse_descriptor(kv["input"])
        return g

    def resolve(self, name: str) -> tuple[str, int, int | None]:
        """A node as (input or component node, first column, end column or None = all),
        through dim-range nodes."""
        lo, hi = 0, None
        seen = set()
        while name in self.dim_ranges:
            if name in seen:
                raise ModelFileError(f"dim-range-node {name!r} refers to itself")
            seen.add(name)
            src, off, dim = self.dim_ranges[name]
            lo, hi = lo + off, lo + off + dim
            name = src
        if name not in self.inputs and name not in self.components:
            raise ModelFileError(f"the network reads node {name!r}, which it does not define")
        return name, lo, hi

    def node_dim(self, nnet: Nnet3, name: str) -> int:
        base, lo, hi = self.resolve(name)
        if hi is not None:
            return hi - lo
        if base in self.inputs:
            return self.inputs[base]
        return nnet.component(self.components[base][0]).output_dim

    def tree_dim(self, nnet: Nnet3, t) -> int:
        """The dimension of what a descriptor tree reads."""
        if t[0] == "node":
            return self.node_dim(nnet, t[1])
        if t[0] == "append":
            return sum(self.tree_dim(nnet, a) for a in t[1])
        if t[0] == "sum":
            return self.tree_dim(nnet, t[1][0])
        if t[0] == "scale":
            return self.tree_dim(nnet, t[2])
        return self.tree_dim(nnet, t[1])


# ---------------------------------------------------------------------- the file
def write_nnet3(w: KaldiWriter, nnet: Nnet3) -> None:
    """``Nnet::Write``."""
    w.token("<Nnet3>")
    w.raw("\n" + "".join(line + "\n" for line in nnet.config_lines) + "\n")
    w.token("<NumComponents>")
    w.int32(len(nnet.components))
    w.newline()
    for c in nnet.components:
        w.token("<ComponentName>")
        w.token(c.name)
        write_component(w, c)
        w.newline()
    w.token("</Nnet3>")


def read_nnet3(r: KaldiReader) -> Nnet3:
    """``Nnet::Read`` (the component types of :data:`.components.COMPONENTS`)."""
    r.expect("<Nnet3>")
    r.line()  # the rest of the <Nnet3> line
    lines = []
    while True:
        line = r.line()
        if line.strip() == "":
            break
        lines.append(line.strip())
    r.expect("<NumComponents>")
    n = r.int32()
    comps = []
    for _ in range(n):
        r.expect("<ComponentName>")
        name = r.token()
        comps.append(read_component(r, name))
    r.expect("</Nnet3>")
    return Nnet3(lines, comps)
