"""Write an exported graph back into the fx.Graph it came from, in place.

An Inductor post-grad pass receives a graph it must rewrite in place: Inductor keeps the
graph object (and its placeholders, whose values it has bound to the compiled inputs). The
exporter builds a new graph; this replaces every node of the old one but its placeholders
with the new graph's nodes, the new placeholders mapped to the old ones in order.
"""

from __future__ import annotations

import torch.fx

from .literals import ExportError


def splice_graph(target: torch.fx.Graph, source: torch.fx.Graph) -> None:
    """Make `target` compute what `source` does, keeping `target`'s placeholders."""
    old_inputs = [n for n in target.nodes if n.op == "placeholder"]
    new_inputs = [n for n in source.nodes if n.op == "placeholder"]
    if len(old_inputs) != len(new_inputs):
        raise ExportError(f"the new graph takes {len(new_inputs)} inputs, "
                          f"the graph it replaces {len(old_inputs)}")
    old_output = next(n for n in target.nodes if n.op == "output")
    for node in reversed(list(target.nodes)):  # users before their inputs
        if node.op != "placeholder":
            target.erase_node(node)
    values: dict[torch.fx.Node, torch.fx.Node] = dict(zip(new_inputs, old_inputs, strict=True))
    result = target.graph_copy(source, values)
    new_output = next(n for n in source.nodes if n.op == "output")
    output = target.output(result, new_output.type)
    output.meta.update(old_output.meta)
    target.lint()
