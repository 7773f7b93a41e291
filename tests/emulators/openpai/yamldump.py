"""js-yaml 3's ``safeDump`` for the values the rest server dumps (a pod's completion status in exit diagnostics).

Block style with two-space indents and sequences indented under their key; strings plain when js-yaml would
leave them plain, single-quoted when they would read as something else (``'123'``, ``'yes'``, ``'a: b'``),
double-quoted with a non-printable character, literal blocks (``|-``) for several lines and folded ones (``>-``)
for lines longer than the line width.
"""

from __future__ import annotations

from typing import Any

from .jscompat import _BOOL, _FLOAT, _INT, _MERGE, _NULL, _TIMESTAMP, number

LINE_WIDTH = 80
_YAML11_BOOLS = {
    "y",
    "Y",
    "yes",
    "Yes",
    "YES",
    "on",
    "On",
    "ON",
    "n",
    "N",
    "no",
    "No",
    "NO",
    "off",
    "Off",
    "OFF",
}
_NOT_FIRST = set("-?:,[]{}#&*!|>'\"%@`=")
_ESCAPES = {0: "\\0", 7: "\\a", 8: "\\b", 9: "\\t", 10: "\\n", 11: "\\v", 12: "\\f", 13: "\\r", 27: "\\e"}
_ESCAPES.update({34: '\\"', 92: "\\\\", 0x85: "\\N", 0xA0: "\\_", 0x2028: "\\L", 0x2029: "\\P"})
_FLOW = set(",[]{}")


def _printable(char: str) -> bool:
    code = ord(char)
    return (
        0x20 <= code <= 0x7E
        or (0xA1 <= code <= 0xD7FF and code not in (0x2028, 0x2029))
        or (0xE000 <= code <= 0xFFFD and code != 0xFEFF)
        or 0x10000 <= code <= 0x10FFFF
    )


def _ambiguous(text: str) -> bool:
    return text in _YAML11_BOOLS or any(
        p.match(text) for p in (_NULL, _BOOL, _INT, _FLOAT, _TIMESTAMP, _MERGE)
    )


def _plain_char(char: str, previous: str) -> bool:
    if char == "#":
        return not previous.isspace()
    return _printable(char) and char not in _FLOW and char != ":"


def _plain(text: str) -> bool:
    if not text or text[0] in _NOT_FIRST or text[0].isspace() or text[-1].isspace():
        return False
    return all(_plain_char(c, text[i - 1] if i else " ") for i, c in enumerate(text)) and not _ambiguous(text)


def _double(text: str) -> str:
    out = []
    for char in text:
        code = ord(char)
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
        elif _printable(char):
            out.append(char)
        elif code <= 0xFF:
            out.append(f"\\x{code:02X}")
        elif code <= 0xFFFF:
            out.append(f"\\u{code:04X}")
        else:
            out.append(f"\\U{code:08X}")
    return '"' + "".join(out) + '"'


def _scalar(text: str, indent: int) -> str:
    if any(not _printable(c) and c != "\n" for c in text):
        return _double(text)
    width = max(min(LINE_WIDTH, 40), LINE_WIDTH - indent)
    foldable = any(len(line) > width and not line.startswith(" ") for line in text.split("\n"))
    if "\n" not in text and not foldable:
        return text if _plain(text) else "'" + text.replace("'", "''") + "'"
    return _block(text, indent, ">" if foldable else "|", width)


def _block(text: str, indent: int, style: str, width: int) -> str:
    chomp = "+" if text.endswith("\n\n") else "" if text.endswith("\n") else "-"
    header = style + (str(2) if text.startswith(" ") else "") + chomp
    body = text[:-1] if text.endswith("\n") else text
    pad = " " * (indent + 2)
    lines: list[str] = []
    for line in body.split("\n"):
        pieces = _fold(line, width) if style == ">" else [line]
        lines.extend(pad + piece if piece else "" for piece in pieces)
    return header + "\n" + "\n".join(lines)


def _fold(line: str, width: int) -> list[str]:
    if not line or line.startswith(" "):
        return [line]
    pieces, rest = [], line
    while len(rest) > width:
        cut = rest.rfind(" ", 0, width + 1)
        if cut <= 0:
            cut = rest.find(" ", width)
            if cut < 0:
                break
        pieces.append(rest[:cut])
        rest = rest[cut + 1 :]
    return [*pieces, rest]


def _value(value: Any, indent: int) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return number(value)
    if isinstance(value, str):
        return _scalar(value, indent)
    raise TypeError(type(value).__name__)


def dump(value: Any, indent: int = 0) -> str:
    """The document js-yaml's ``safeDump`` writes, ending with a newline."""
    return _node(value, indent) + "\n"


def _node(value: Any, indent: int) -> str:
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return "{}"
        lines = []
        for key, item in value.items():
            key_text = _scalar(str(key), indent)
            if isinstance(item, dict | list) and item:
                child = indent + 2
                lines.append(f"{pad}{key_text}:\n{_node(item, child)}")
            else:
                lines.append(
                    f"{pad}{key_text}: {_value(item, indent) if not isinstance(item, dict | list) else _node(item, indent)}"
                )
        return "\n".join(lines)
    if isinstance(value, list):
        if not value:
            return "[]"
        lines = []
        for item in value:
            if isinstance(item, dict | list) and item:
                inner = _node(item, indent + 2)
                lines.append(f"{pad}- {inner[indent + 2 :]}")
            else:
                lines.append(
                    f"{pad}- {_value(item, indent) if not isinstance(item, dict | list) else _node(item, indent)}"
                )
        return "\n".join(lines)
    return pad + _value(value, indent)


__all__ = ["dump"]
