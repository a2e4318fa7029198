"""The real-model corpus (test/corpus): HF transformers decoders, compressed-tensors presets
and vLLM's native forms, compiled with backend="vllm_xdsl" (inner="eager"), with the token
dim marked dynamic and (every compressed-tensors and vLLM-form case, a subset of the HF
models: corpus.cases) with dynamic=True.

Per case (model or form, dtype, dynamic shapes): the counts of test/corpus/expected.py exactly (sites raised
per type, fusions formed, graphs, bit-exactness), so that a regression fails and an
improvement must update the table (`python bench/corpus_table.py --expectations` prints it);
no compile fallback; the compiled output within the OPS.md tolerance of eager; and the
ground-truth site counts agreeing with the captured aten graph.
"""

from __future__ import annotations

from collections import Counter

import pytest
from corpus import CASES, Row, Sites, measure
from corpus.expected import EXPECTED
from corpus.sites import op_kinds, raised_sites
from corpus.table import format_expectations, format_table


@pytest.fixture(scope="module")
def rows() -> dict[str, Row]:
    return {key: measure(case) for key, case in CASES.items()}


def _whole(rows: dict[str, Row]) -> str:
    measured = list(rows.values())
    return (f"\nmeasured corpus:\n{format_table(measured)}\n\n"
            f"as test/corpus/expected.py:\n{format_expectations(measured)}")


def test_expectations_cover_the_corpus() -> None:
    assert sorted(EXPECTED) == sorted(CASES)


@pytest.mark.parametrize("key", list(CASES))
def test_counts(rows: dict[str, Row], key: str) -> None:
    row = rows[key]
    assert row.expectation() == EXPECTED.get(key), f"{key}: counts changed" + _whole(rows)


@pytest.mark.parametrize("key", list(CASES))
def test_no_fallback(rows: dict[str, Row], key: str) -> None:
    assert rows[key].fallbacks == [], _whole(rows)


@pytest.mark.parametrize("key", list(CASES))
def test_within_tolerance(rows: dict[str, Row], key: str) -> None:
    assert rows[key].tolerance_problem is None, _whole(rows)


@pytest.mark.parametrize("key", list(CASES))
def test_inexact_rows_are_explained(rows: dict[str, Row], key: str) -> None:
    """A row that is not bit-exact is bit-exact without one of torch's decompositions
    (corpus.decomps): its difference is not the pipeline's."""
    row = rows[key]
    assert row.bit_exact or row.inexact_from is not None, _whole(rows)


def _raises_quants(key: str) -> bool:
    return not EXPECTED[key].partition(" quant ")[2].startswith("0/")


# Under dynamic=True vLLM's per-tensor form is raised as a static quant of the scale it
# computes (docs/CORPUS.md): the one op a twin may raise differently at a site.
OP_CHANGES_UNDER_DYNAMIC = {("vllm.dynamic_scaled_fp8_quant", "vllm.static_scaled_fp8_quant")}


@pytest.mark.parametrize("key", [k for k in CASES if f"{k}/dynamic" in CASES and _raises_quants(k)])
def test_dynamic_true_raises_the_same_variants(rows: dict[str, Row], key: str) -> None:
    """Under `torch.compile(dynamic=True)` Dynamo no longer specializes float attributes:
    compressed-tensors' fp8 range reaches the aten graph as `aten.scalar_tensor(448.0)`
    instead of a lifted constant, the norms' epsilons as graph inputs. Where both compiles
    raise as many quants, each site is raised onto the same variant (graph order); where
    dynamic=True raises fewer (test_counts says which), each is one the token-dim compile
    raised."""
    token, dynamic = rows[key].variants, rows[f"{key}/dynamic"].variants
    assert token, "no quant variant recorded"
    if len(dynamic) != len(token):
        assert set(dynamic) <= set(token), (token, dynamic)
        return
    for t, d in zip(token, dynamic, strict=True):
        (t_op, t_variant), (d_op, d_variant) = t.split(" ", 1), d.split(" ", 1)
        assert t_op == d_op or (t_op, d_op) in OP_CHANGES_UNDER_DYNAMIC, (token, dynamic)
        assert t_variant == d_variant, (token, dynamic)


@pytest.mark.parametrize("key", [k for k, c in CASES.items() if c.family != "ct"
                                 or not c.name.endswith("-stock")])
def test_sites_match_the_graph(rows: dict[str, Row], key: str) -> None:
    """The ground truth (module calls, structure) and the aten graph count the same norms,
    residual adds and quants."""
    row = rows[key]
    assert row.graph_expected is not None
    assert row.graph == row.graph_expected, _whole(rows)


def test_op_classification() -> None:
    assert op_kinds("vllm.fused_add_rms_norm_quant") == {"norm", "residual", "quant"}
    assert op_kinds("vllm.silu_and_mul_quant") == {"act", "quant"}
    with pytest.raises(ValueError, match="unclassified"):
        op_kinds("vllm.softmax")
    raised = raised_sites(
        Counter({"vllm.rms_norm": 2, "vllm.fused_add_rms_norm": 1, "torch.call": 9,
                 "vllm.static_scaled_fp8_quant": 3, "vllm.silu_and_mul": 1}),
        Counter({"vllm.rms_norm_quant": 1, "vllm.fused_add_rms_norm_quant": 1,
                 "vllm.silu_and_mul": 1, "vllm.static_scaled_fp8_quant": 1}))
    assert raised == Sites(norm=3, residual=1, act=1, quant=3, pairs=2)
