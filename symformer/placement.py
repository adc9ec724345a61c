"""Where a stage sits in the block, in words: ``("Layer 1", "Head 2")``.

Read from the stage's name (``layer1.head2.Q``, ``decoder.layer1.cross.head1.K``),
so a stage of any operation is placed wherever it sits; the step's own name
comes from its operation (``stage.op.symbol.title``).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from symformer.engine.graph import Stage

_GROUPS = [
    (re.compile(r"^(?:(\w+)\.)?head(\d+)$"), lambda m: (
        f"{m.group(1).capitalize()}-attention head {m.group(2)}" if m.group(1)
        else f"Head {m.group(2)}")),
    (re.compile(r"^kv_head(\d+)$"), lambda m: f"Key/value head {m.group(1)}"),
    (re.compile(r"^attention$"), lambda m: "Multi-head attention"),
    (re.compile(r"^(self|cross)$"), lambda m: f"{m.group(1).capitalize()}-attention"),
    (re.compile(r"^add_norm(\d+)$"), lambda m: f"Add & Norm {m.group(1)}"),
    (re.compile(r"^norm(\d+)$"), lambda m: f"Norm {m.group(1)} (pre-norm)"),
    (re.compile(r"^ffn$"), lambda m: "Feed-forward"),
]


def part_of(stage: Stage) -> tuple[str, ...]:
    """Where a stage sits in the block: ``("Layer 1", "Head 2")``, ``("Input",)``.

    A gradient ``grad.S`` sits where S does; a weight's gradient where the stage
    owning the weight does (the stage before its gradient among its inputs)."""
    parts = stage.name.split(".")
    if parts[0] == "grad" and stage.op.is_gradient:
        g = stage.derivation
        source = stage.name.removeprefix("grad.")
        if source in g:
            return part_of(g[source])
        if stage.op.of_weight:  # a contribution's: where its source sits
            return part_of(g[stage.inputs[-2] if len(stage.inputs) > 1 else stage.inputs[0]])
    side = []
    if parts[0] in ("encoder", "decoder"):
        side = [parts.pop(0).capitalize()]
    elif stage.side == "decoder":  # logits, probabilities, next_token
        side = ["Decoder"]
    if not parts[0].startswith("layer"):
        if getattr(stage.derivation.example, "attention", None) is not None:
            return (*side, "Attention")  # an example that starts from given Q, K, V
        return (*side, "Input" if _before_layers(stage) else "Output")
    where = [*side, f"Layer {parts[0][5:]}"]
    rest = parts[1:-1] if len(parts) > 2 else parts[1:]
    group = ".".join(rest)
    for pattern, label in _GROUPS:
        m = pattern.match(group)
        if m:
            where.append(label(m))
            break
    return tuple(where)


def _before_layers(stage: Stage) -> bool:
    """True when the stage reads no layer's stage (embeddings, PE, their sum)."""
    g = stage.derivation
    return all(g[name].layer == 0 and _before_layers(g[name]) for name in stage.inputs)
