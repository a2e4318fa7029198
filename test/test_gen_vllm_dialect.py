"""vllm_xdsl/dialects/vllm.py is what the generator makes of the catalog, and the generator
says clearly what it cannot derive."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_xdsl.core import catalog
from vllm_xdsl.core.catalog import Param
from vllm_xdsl.dialects import vllm
from vllm_xdsl.tools import gen_vllm_dialect as gen


def test_the_generated_dialect_is_current() -> None:
    # A catalog change without a rerun fails here, with the command to run.
    assert gen.render() == Path(vllm.__file__).read_text(), (
        "vllm_xdsl/dialects/vllm.py is stale: run python -m vllm_xdsl.tools.gen_vllm_dialect"
    )


def test_one_vllm_op_per_spec_with_its_name() -> None:
    assert list(vllm.OPS_BY_NAME) == list(catalog.SPECS)
    for name, op in vllm.OPS_BY_NAME.items():
        assert op.name == f"vllm.{name}" and op.__name__ == vllm.op_class_name(name)
        assert getattr(vllm, op.__name__) is op  # a class a reader finds by its name


def test_a_members_own_scalars_become_properties() -> None:
    props = vllm.GeluAndMulSparseOp.get_irdl_definition().properties
    assert set(props) - {"operandSegmentSizes"} == {"std_multiplier", "approximate"}
    assert "std_multiplier" not in vllm.GeluAndMulOp.get_irdl_definition().properties


def test_check_reports_a_stale_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "vllm.py"
    stale.write_text("# edited by hand\n")
    monkeypatch.setattr(gen, "TARGET", stale)
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("gen_vllm_dialect: ") and "stale" in err and "\n" not in err
    assert gen.main([]) == 0 and stale.read_text() == gen.render()
    assert gen.main(["--check"]) == 0


def test_what_it_cannot_derive_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    odd = dataclasses.replace(catalog.SILU_AND_MUL, name="silu_and_mul_odd",
                              params=(*catalog.SILU_AND_MUL.params, Param("dt", "dtype")))
    monkeypatch.setitem(catalog.SPECS, odd.name, odd)
    assert gen.main(["--check"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("gen_vllm_dialect: error: silu_and_mul_odd: parameter 'dt' of kind 'dtype':"
                   " a generated member's own parameters are float, int, str, bool")


def test_a_quant_signature_is_derived_from_its_spec() -> None:
    """A new quant form is a catalog spec: its operands, properties, results and syntax are
    generated (required tensors positional, optional ones after their keyword)."""
    new = dataclasses.replace(
        catalog.DYNAMIC_PER_TOKEN_SCALED_FP8_QUANT, name="dynamic_group_int8_quant",
        params=(Param("x", "tensor"), Param("scale_ub", "tensor", optional=True, default=None),
                Param("group_size", "int"), *catalog.DYNAMIC_PER_TOKEN_SCALED_INT8_QUANT.params[1:]),
        form=catalog.QuantForm("int8", False, "group"))
    names: set[str] = set()
    sig, lines = gen._signature(new, names)
    text = "\n".join(lines)
    assert sig == "DynamicGroupInt8QuantSignature"
    assert "class DynamicGroupInt8QuantSignature(_UnfusedQuantSignature):" in text
    assert "    scale_ub = opt_operand_def(TensorType)" in text
    assert "    group_size = prop_def(IntegerAttr[I64])" in text
    assert "    scales = result_def(TensorType)" in text
    assert '"$x "' in text and "type($q) `,` type($scales)" in text
    assert "variant" not in text and "zero_point = " not in text  # the family's


def test_a_norm_signature_must_be_written() -> None:
    new = dataclasses.replace(catalog.RMS_NORM, name="rms_norm_twice")
    with pytest.raises(gen.GenerateError, match="vllm_families.py has no RmsNormTwiceSignature"):
        gen._signature(new, set())


def test_the_module_runs() -> None:
    done = subprocess.run([sys.executable, "-m", "vllm_xdsl.tools.gen_vllm_dialect", "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
