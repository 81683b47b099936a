"""The one Markdown pipe-table writer of the package.

Every Markdown table the package writes (the tables and reports of the scripts under
``pipelines/``, the reproduction pages rendered from saved records, the benchmark report, the
pipeline's evaluation summary) goes through :func:`pipe_table`, so the layout (the header row,
the rule, one line per row, no final newline) is declared once. How a number becomes a cell's
text stays with the caller: a table of seconds and a table of ``mean ± std`` over seeds want
different cells, and the pages already written must not change.
"""

from __future__ import annotations

__all__ = ["pipe_table"]

#: The rule under the header for each column alignment (None: Markdown's default, left).
_RULES = {None: "---", "left": ":---", "right": "---:", "center": ":---:"}


def pipe_table(headers, rows, align=None):
    """A Markdown pipe table of header strings and rows of cell strings, without a final newline.

    Parameters
    ----------
    headers : sequence of str
        The column headers.
    rows : iterable of sequences of str
        The cells of each row, as text (the caller formats its numbers), one per header.
    align : None, str or sequence
        The alignment of the columns: None for the plain ``---`` rule, one of ``"left"``,
        ``"right"``, ``"center"`` for every column, or a sequence of those (or None) per column.

    Returns
    -------
    str
        The header line, the rule and one line per row, joined by newlines.

    Raises
    ------
    ValueError
        A row whose number of cells differs from the number of headers, an unknown alignment,
        or an alignment sequence of another length.

    Examples
    --------
    >>> print(pipe_table(["k", "value"], [["1", "0.500"], ["2", "0.250"]]))
    | k | value |
    |---|---|
    | 1 | 0.500 |
    | 2 | 0.250 |
    >>> print(pipe_table(["k", "MSE"], [["1", "0.5"]], align="right"))
    | k | MSE |
    |---:|---:|
    | 1 | 0.5 |
    """
    headers = [str(h) for h in headers]
    aligns = [align] * len(headers) if align is None or isinstance(align, str) else list(align)
    if len(aligns) != len(headers):
        raise ValueError(f"pipe_table: align has {len(aligns)} entries for {len(headers)} headers")
    unknown = [a for a in aligns if a not in _RULES]
    if unknown:
        raise ValueError(
            f"pipe_table: unknown alignment {unknown[0]!r}; expected one of "
            "None, 'left', 'right', 'center'"
        )
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(_RULES[a] for a in aligns) + "|"]
    for number, cells in enumerate(rows):
        cells = list(cells)
        if len(cells) != len(headers):
            raise ValueError(
                f"pipe_table: row {number} has {len(cells)} cells for {len(headers)} headers "
                f"{headers}"
            )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
