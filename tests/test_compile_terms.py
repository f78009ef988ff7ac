"""The compiler's term registry: a term added under a name placement.compile.terms does not list fails while the
model is built, naming itself; every listed name is one the verifier checks."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from placement.compile import terms
from placement.compile.context import ObjectiveRegistry
from placement.verify.objective import TERMS


def _variable() -> cp_model.IntVar:
    return cp_model.CpModel().new_bool_var("b")


def test_a_term_added_under_an_unregistered_name_is_refused_naming_it() -> None:
    registry = ObjectiveRegistry()
    with pytest.raises(terms.UnknownTerm) as info:
        registry.add("priorty", [_variable()], [1.0])
    message = str(info.value)
    assert "'priorty'" in message and "placement.compile.terms" in message and "priority" in message
    assert registry.terms == {}  # nothing half-added


def test_a_cap_under_an_unregistered_name_is_refused() -> None:
    with pytest.raises(terms.UnknownTerm, match="'fairnes'"):
        ObjectiveRegistry().cap("fairnes", 1.0)


def test_every_registered_name_is_accepted() -> None:
    registry = ObjectiveRegistry()
    for name in sorted(terms.NAMES):
        registry.add(name, [_variable()], [1.0])
        registry.cap(name, 1.0)
    assert set(registry.terms) == set(terms.NAMES) == set(registry.caps)


def test_the_unknown_term_error_is_a_value_error() -> None:
    assert issubclass(terms.UnknownTerm, ValueError)
    assert terms.check(terms.PRIORITY) == "priority"


def test_the_compiler_and_the_verifier_know_the_same_terms() -> None:
    # The verifier rejects a name it does not know, so a term the compiler may add must be one it checks.
    assert set(terms.NAMES) == set(TERMS)
