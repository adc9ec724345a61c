"""moe4: the block diagram draws the mixture's router matrix and its experts' weights
(the example file's router is 2 x 3: d_model = 2, three experts)."""

from __future__ import annotations

from symformer import load_example
from symformer.figures.architecture import plan


def test_moe_box_labels_the_router_matrix_and_expert_weights():
    boxes = [box for segment in plan(load_example("moe_dropout")).segments
             for box in segment.boxes if box.lines[0] == "Mixture of experts"]
    assert len(boxes) == 1
    text = " ".join(boxes[0].lines)
    assert r"router $W_{\mathrm{router}}$ ($2 \times 3$): top-2" in text
    assert r"$W_{1}^{[e]}, W_{2}^{[e]}$" in text and "3 ReLU experts" in text
