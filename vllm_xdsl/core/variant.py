"""Quant variants: where a real source's quantization rounds differently from OPS.md's table.

A variant is plain data next to the scheme (docs/OPS.md, section "Variants"). Its default
(every field at its default) is the contract of the OPS.md tables, so a scheme without a
variant means exactly what it meant before variants existed. The text spelling is shared by
the torch ops (the `variant` string argument) and the IR (`#vllm.quant<...>` keywords and
the unfused ops' `variant` property), one keyword per field that differs from the default:

    div | recip               x / s, or x * (1 / s)       (default: what the op's row says)
    quotient bf16|f16         round x / s to that dtype before the zero point and the clamp
    scale bf16|f16            dynamic scales are computed in f32 and rounded to this dtype
    min_scale                 dynamic floor: s = max(s, 1 / (FMAX * 512)), after ue8m0
    zero_eps <float>          dynamic floor: s = where(s == 0, eps, s) (eps in the scale dtype)
    range <float>             dynamic scale s = absmax / range (default: FMAX or IMAX)

A runtime zero point is not a field: it is an optional operand (`zero_point`), added to the
rounded quotient in the quotient dtype before the clamp.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from vllm_xdsl.core.dtypes import ROUNDING, DType

Scaling = Literal["", "div", "recip"]
Floor = Literal["", "min_scale", "zero_eps"]
# Dtypes a quotient or a scale may be rounded to, by keyword (the DType's spelling).
ROUNDING_DTYPES: dict[str, DType] = {d.value: d for d in ROUNDING}


@dataclass(frozen=True)
class QuantVariant:
    """The numerics of a quantization beyond its scheme; all defaults = the OPS.md contract."""

    scaling: Scaling = ""
    quotient_dtype: DType = DType.F32
    scale_dtype: DType = DType.F32
    floor: Floor = ""
    floor_eps: float = 0.0
    scale_range: float = 0.0

    @property
    def is_default(self) -> bool:
        return self == DEFAULT_VARIANT

    def problem(self) -> str | None:
        """Why these fields make no sense whatever the scheme, or None."""
        if self.scaling not in ("", "div", "recip"):
            return f"scaling must be div or recip, not {self.scaling!r}"
        for what, d in (("quotient", self.quotient_dtype), ("scale", self.scale_dtype)):
            if d not in ROUNDING:
                return f"{what} dtype must be f32, bf16 or f16, not {d}"
        if self.floor not in ("", "min_scale", "zero_eps"):
            return f"floor must be min_scale or zero_eps, not {self.floor!r}"
        if (self.floor == "zero_eps") != (self.floor_eps != 0.0):
            return "zero_eps needs a positive eps (and an eps needs zero_eps)"
        if self.floor_eps < 0.0 or self.scale_range < 0.0:
            return "zero_eps and range must be positive"
        return None

    def spelling(self) -> str:
        """The keyword text (empty for the default), as `parse_variant` reads it."""
        words: list[str] = []
        if self.scaling:
            words.append(self.scaling)
        if self.quotient_dtype != DType.F32:
            words += ["quotient", self.quotient_dtype.value]
        if self.scale_dtype != DType.F32:
            words += ["scale", self.scale_dtype.value]
        if self.floor == "min_scale":
            words.append("min_scale")
        elif self.floor == "zero_eps":
            words += ["zero_eps", repr(self.floor_eps)]
        if self.scale_range:
            words += ["range", repr(self.scale_range)]
        return " ".join(words)


DEFAULT_VARIANT = QuantVariant()


@lru_cache(maxsize=256)
def parse_variant(text: str) -> QuantVariant:
    """The variant a keyword text spells; ValueError naming the bad word."""
    words = text.split()
    scaling: Scaling = ""
    floor: Floor = ""
    dtypes = {"quotient": DType.F32, "scale": DType.F32}
    numbers = {"zero_eps": 0.0, "range": 0.0}
    i = 0
    while i < len(words):
        w = words[i]
        if w == "div":
            scaling = "div"
        elif w == "recip":
            scaling = "recip"
        elif w == "min_scale":
            floor = "min_scale"
        elif w in dtypes or w in numbers:
            if i + 1 >= len(words):
                raise ValueError(f"quant variant {text!r}: {w} needs a value")
            i += 1
            if w in dtypes:
                if words[i] not in ROUNDING_DTYPES:
                    raise ValueError(f"quant variant {text!r}: {w} dtype must be f32, bf16 or f16")
                dtypes[w] = ROUNDING_DTYPES[words[i]]
            else:
                try:
                    numbers[w] = float(words[i])
                except ValueError:
                    raise ValueError(f"quant variant {text!r}: {w} needs a number") from None
                if w == "zero_eps":
                    floor = "zero_eps"
        else:
            raise ValueError(f"quant variant {text!r}: unknown keyword {w!r}")
        i += 1
    variant = QuantVariant(scaling, dtypes["quotient"], dtypes["scale"], floor,
                           numbers["zero_eps"], numbers["range"])
    problem = variant.problem()
    if problem:
        raise ValueError(f"quant variant {text!r}: {problem}")
    return variant


# The fields the Triton kernels implement: every scheme; every dynamic scale.
EPILOGUE_FIELDS = ("scaling", "quotient_dtype", "zero_point")
SCALE_FIELDS = ("scale_dtype", "floor", "scale_range")


def variant_problem_beyond(args: dict[str, Any], provider: str,
                           supported: tuple[str, ...]) -> str | None:
    """For a provider's supports_args: why its kernels, which implement the variant fields
    `supported` ("zero_point" among them if they take one), cannot run these arguments (a
    `variant` or a `zero_point`), or None."""
    variant = args.get("variant") or ""
    if args.get("zero_point") is not None and "zero_point" not in supported:
        return f"the {provider} kernels have no zero point"
    try:
        v = parse_variant(variant)
    except ValueError as e:
        return str(e)
    extra = [f for f in ("scaling", "quotient_dtype", "scale_dtype", "floor", "scale_range")
             if f not in supported and getattr(v, f) != getattr(DEFAULT_VARIANT, f)]
    if extra:
        return (f"the {provider} kernels implement quant variant fields {', '.join(supported)}"
                f" only, not {', '.join(extra)} (variant {variant!r})")
    return None
