"""The one Markdown pipe-table writer (ppa_dask.utils.tables) and that it is the only one.

The tables are read back by markdown-it (the parser behind the documentation's MyST pages), an
independent reading of what the writer produced.
"""

import ast
import pathlib
import re

import pytest
from markdown_it import MarkdownIt

import ppa_dask
from ppa_dask.utils.tables import pipe_table

PACKAGE = pathlib.Path(ppa_dask.__file__).parent

#: Modules that still spell a table's rule themselves, to be moved onto pipe_table by the
#: helpers restructuring them (issue 24); remove a module from here when it adopts pipe_table.
NOT_YET_ON_PIPE_TABLE = set()


def _parsed(text):
    """(headers, rows, alignments) of the one table markdown-it finds in ``text``."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    assert [t.type for t in tokens].count("table_open") == 1, text
    headers, rows, aligns, row, section = [], [], [], None, None
    for i, token in enumerate(tokens):
        if token.type in ("thead_open", "tbody_open"):
            section = token.type
        elif token.type == "tr_open":
            row = []
        elif token.type in ("th_open", "td_open"):
            row.append(tokens[i + 1].content)
            if token.type == "th_open":
                aligns.append(token.attrGet("style"))
        elif token.type == "tr_close":
            (headers if section == "thead_open" else rows).append(row)
    return headers[0], rows, aligns


def test_a_table_reads_back_as_its_headers_and_cells():
    headers = ["q", "mean ± std", "paper"]
    rows = [["1", "0.50 ± 0.01", "-"], ["2", "", "0.25"], ["10", "1.000e-05", "n/a"]]
    text = pipe_table(headers, rows)
    assert not text.endswith("\n")
    assert _parsed(text) == (headers, rows, [None, None, None])
    # a row per line after the header and the rule
    assert len(text.splitlines()) == 2 + len(rows)


def test_alignments_reach_the_parsed_table():
    text = pipe_table(["k", "PCA", "PPA"], [["1", "2", "3"]], align="right")
    assert _parsed(text)[2] == ["text-align:right"] * 3
    text = pipe_table(["k", "PCA", "PPA"], [["1", "2", "3"]], align=[None, "center", "left"])
    assert _parsed(text)[2] == [None, "text-align:center", "text-align:left"]


def test_a_table_without_rows_is_its_header():
    assert _parsed(pipe_table(["a", "b"], [])) == (["a", "b"], [], [None, None])


def test_bad_tables_are_refused_with_what_is_wrong():
    with pytest.raises(ValueError, match=r"row 1 has 1 cells for 2 headers \['a', 'b'\]"):
        pipe_table(["a", "b"], [["1", "2"], ["3"]])
    with pytest.raises(ValueError, match="unknown alignment 'middle'"):
        pipe_table(["a"], [["1"]], align="middle")
    with pytest.raises(ValueError, match="align has 1 entries for 2 headers"):
        pipe_table(["a", "b"], [["1", "2"]], align=["right"])


def _docstrings(tree):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                yield body[0].value


_RULE = re.compile(r"\|\s*:?-{3,}:?\s*\|")


def _spells_a_rule(tree):
    """Whether a module's code (not its docstrings) writes a pipe table's rule itself."""
    skip = {id(node) for node in _docstrings(tree)}
    rules = ("---", ":---", "---:", ":---:")
    texts = (
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
    )
    return any(_RULE.search(text) or text.strip() in rules for text in texts)


def test_the_scanner_finds_a_hand_written_rule():
    assert _spells_a_rule(ast.parse('x = "|---|---|"'))
    assert _spells_a_rule(ast.parse('x = "|" + "|".join("---" for _ in h)'))
    assert not _spells_a_rule(ast.parse('def f():\n    """|---|"""\n'))


@pytest.mark.slow
def test_pipe_table_is_the_only_table_writer():
    spelled = {
        path.relative_to(PACKAGE).as_posix()
        for path in sorted(PACKAGE.rglob("*.py"))
        if _spells_a_rule(ast.parse(path.read_text(encoding="utf-8")))
    }
    spelled.discard("utils/tables.py")
    assert spelled - NOT_YET_ON_PIPE_TABLE == set(), "write tables with utils.tables.pipe_table"
    assert NOT_YET_ON_PIPE_TABLE - spelled == set(), (
        "these modules use pipe_table now: remove them from NOT_YET_ON_PIPE_TABLE"
    )
