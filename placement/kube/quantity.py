"""Kubernetes resource quantities ("500m", "64Gi", "1.5", "1e3", "100M"), parsed exactly.

Kubernetes stores quantities as decimal strings with a suffix (k8s.io/apimachinery
`resource.Quantity`). Floats would turn "0.1" CPUs or "1.1Gi" into approximations, and a pod that
requests exactly what a node has left must still fit after the round trip: so every value is a
`fractions.Fraction`, and callers convert to the wire format's units only at the very end.

Grammar (apimachinery's quantity.go comment):

    quantity      ::= signedNumber suffix
    suffix        ::= binarySI | decimalExponent | decimalSI
    binarySI      ::= Ki | Mi | Gi | Ti | Pi | Ei
    decimalSI     ::= m | "" | k | M | G | T | P | E
    decimalExponent ::= "e" signedNumber | "E" signedNumber
    number        ::= digits | digits "." digits | digits "." | "." digits

"1E" is 10^18 (exa) while "1E3" is 1000: the exponent form wins when digits follow the E.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"m": Fraction(1, 1000), "": Fraction(1), "k": Fraction(10**3), "M": Fraction(10**6),
            "G": Fraction(10**9), "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18)}
_NUMBER = r"[+-]?(?:\d+\.?\d*|\.\d+)"
_QUANTITY = re.compile(rf"^(?P<number>{_NUMBER})(?:(?P<exp>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE])?)$")

GIB = 2**30
MIB = 2**20


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message quotes it and says what is allowed."""


def parse_quantity(value: object) -> Fraction:
    """The exact value of a quantity given as a string or a YAML/JSON number.

    Numbers are accepted because `cpu: 2` and `cpu: 0.5` are valid YAML for the same quantities;
    a float goes through its shortest repr ("0.1"), which is the text the YAML author wrote.
    """
    if isinstance(value, bool):  # bool is an int subclass: `cpu: true` is a typo, not 1
        raise QuantityError(f"{value!r} is not a quantity (a boolean)")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a finite quantity")
        return Fraction(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity (expected a string such as '500m', '64Gi' or '2')")
    match = _QUANTITY.match(value)  # no stripping: Kubernetes rejects surrounding blanks too
    if match is None:
        raise QuantityError(f"{value!r} is not a Kubernetes quantity (examples: '500m', '1.5', '64Gi', "
                            "'100M', '1e3'; binary suffixes Ki..Ei, decimal m, k, M, G, T, P, E)")
    number = Fraction(match["number"])
    if match["exp"] is not None:
        exponent = int(match["exp"][1:])
        if abs(exponent) > 100:  # a typo such as 1e999999 must not build a huge integer
            raise QuantityError(f"{value!r}: exponent {exponent} is out of range")
        return number * Fraction(10) ** exponent
    suffix = match["suffix"] or ""
    return number * (_BINARY[suffix] if suffix in _BINARY else _DECIMAL[suffix])


def format_quantity(value: Fraction, binary: bool = False) -> str:
    """A canonical quantity string: integers plain, milli-units with 'm', bytes with Ki..Ti when exact.

    Used by the exporters (Kueue's resourceUsage), so a value read and written again keeps its meaning.
    """
    if binary and value.denominator == 1 and value > 0:
        for suffix, factor in sorted(_BINARY.items(), key=lambda kv: -kv[1]):
            if value % factor == 0:
                return f"{value // factor}{suffix}"
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return f"{math.ceil(milli)}m"  # Kubernetes rounds sub-milli quantities up, never down
