import math

from placement.bench.table import cell, markdown, row_cells


def test_cells_show_missing_values_flags_and_formats() -> None:
    assert [cell(None, ".2f"), cell(math.nan, ".2f"), cell(True, "s"), cell(3.14159, ".2f"), cell("a", "s")] == \
        ["—", "—", "yes", "3.14", "a"]
    assert row_cells({"x": 2}, [("X", "x", "d"), ("Y", "y", ".1f")]) == ["2", "—"]


def test_text_columns_go_left_numbers_right_and_pipes_are_escaped() -> None:
    lines = markdown(["name", "n"], [["a|b", "7"], ["c", "123"]], left={"name"})
    assert lines == ["| name |   n |", "|------|----:|", "| a\\|b |   7 |", "| c    | 123 |"]
