"""Kubernetes quantities: exact values for every suffix form, clear errors for everything else.

Expected values are worked out by hand from the grammar in apimachinery's quantity.go, not by
calling the parser under test.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from placement.kube.quantity import QuantityError, format_quantity, parse_quantity

CASES = [
    ("500m", Fraction(1, 2)),
    ("1m", Fraction(1, 1000)),
    ("64Gi", 64 * 2**30),
    ("1.5Gi", 3 * 2**29),
    ("1Ki", 1024),
    ("2Mi", 2 * 2**20),
    ("1Ti", 2**40),
    ("1Pi", 2**50),
    ("1Ei", 2**60),
    ("1.5", Fraction(3, 2)),
    ("0.1", Fraction(1, 10)),
    (".5", Fraction(1, 2)),
    ("5.", 5),
    ("+1", 1),
    ("-1", -1),
    ("0", 0),
    ("1e3", 1000),
    ("1E3", 1000),
    ("12e-3", Fraction(12, 1000)),
    ("1.5e2", 150),
    ("129e6", 129_000_000),
    ("100M", 100_000_000),
    ("2k", 2000),
    ("1G", 10**9),
    ("1T", 10**12),
    ("1P", 10**15),
    ("1E", 10**18),  # exa, not an exponent: no digits follow the E
    ("191450m", Fraction(191450, 1000)),
    ("2086393864Ki", 2086393864 * 1024),
    # YAML numbers are quantities too: `cpu: 2`, `cpu: 0.5`
    (2, 2),
    (0.5, Fraction(1, 2)),
    (0.1, Fraction(1, 10)),  # the text the author wrote, not the binary float
]


@pytest.mark.parametrize(("text", "expected"), CASES, ids=[str(c[0]) for c in CASES])
def test_quantities_parse_exactly(text: object, expected: Fraction | int) -> None:
    assert parse_quantity(text) == expected


BAD = ["", "1.5.5", "Gi", "1gi", "1 Gi", " 1", "1KiB", "1K", "e3", "1e", "1e3Gi", "0x10", "1,5", "--1", "1mi",
       True, None, [1], {"cpu": 1}, float("nan"), float("inf")]


@pytest.mark.parametrize("text", BAD, ids=[repr(b) for b in BAD])
def test_malformed_quantities_are_rejected_with_the_text_quoted(text: object) -> None:
    with pytest.raises(QuantityError) as err:
        parse_quantity(text)
    assert repr(text) in str(err.value) or str(text) in str(err.value)


def test_huge_exponents_are_refused_rather_than_computed() -> None:
    with pytest.raises(QuantityError, match="out of range"):
        parse_quantity("1e999999")


@pytest.mark.parametrize(("value", "binary", "text"), [
    (Fraction(64 * 2**30), True, "64Gi"),
    (Fraction(1536 * 2**20), True, "1536Mi"),
    (Fraction(1000), True, "1000"),  # not a multiple of 1024: plain bytes
    (Fraction(96), False, "96"),
    (Fraction(1, 2), False, "500m"),
    (Fraction(191450, 1000), False, "191450m"),
    (Fraction(1, 3000), False, "1m"),  # below a milli-unit: rounded up, as Kubernetes does
])
def test_format_quantity_writes_canonical_text(value: Fraction, binary: bool, text: str) -> None:
    assert format_quantity(value, binary) == text


@pytest.mark.parametrize("text", ["500m", "64Gi", "1.5", "100M", "1e3", "3Ti", "7"])
def test_format_then_parse_is_the_identity(text: str) -> None:
    value = parse_quantity(text)
    assert parse_quantity(format_quantity(value)) == value
    assert parse_quantity(format_quantity(value, binary=True)) == value
