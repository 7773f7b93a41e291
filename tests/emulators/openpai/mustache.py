"""The ``<% ... %>`` templates of the job protocol, rendered as the rest server and the runtime render them.

The rest server (``middlewares/v2/protocol.js``) parses commands with mustache.js 2.3's ``Writer.parse`` and keeps
only text and plain name tags: a name that resolves is replaced by its JavaScript string, one that does not stays
as ``<% name %>``, and every other tag (sections with their content, comments, partials, ``&``) is dropped.
``[N]`` in a name is read as ``.N``. Lines holding only non-name tags and blanks disappear, as in mustache.js.

The job's runtime then renders what is left with pystache against ``$secrets`` (only when the job has secrets):
names HTML-escaped, unknown names rendered empty.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from . import jscompat
from .errors import uncaught

_TAG_TYPE = re.compile(r"#|\^|/|>|\{|&|=|!")


@dataclass
class Token:
    type: str  # text, name, #, ^, &, >, !, =
    value: str
    children: list[Token] = field(default_factory=list)


def parse(template: str, tags: tuple[str, str] = ("<%", "%>")) -> list[Token]:
    """mustache.js 2.3 ``parseTemplate``: raises what it throws (reaching express as a 500 without code)."""
    if not template:
        return []
    parser = _Parser(template, tags)
    return parser.run()


class _Parser:
    def __init__(self, template: str, tags: tuple[str, str]) -> None:
        self.text = template
        self.pos = 0
        self.tokens: list[Token | None] = []
        self.spaces: list[int] = []
        self.has_tag = False
        self.non_space = False
        self._compile(tags)

    def _compile(self, tags: tuple[str, str]) -> None:
        self.opening = re.compile(re.escape(tags[0]) + r"\s*")
        self.closing = re.compile(r"\s*" + re.escape(tags[1]))
        self.closing_curly = re.compile(r"\s*" + re.escape("}" + tags[1]))

    def _scan(self, regex: re.Pattern[str]) -> str:
        match = regex.match(self.text, self.pos)
        if not match:
            return ""
        self.pos = match.end()
        return match.group(0)

    def _scan_until(self, regex: re.Pattern[str]) -> str:
        match = regex.search(self.text, self.pos)
        end = match.start() if match else len(self.text)
        value = self.text[self.pos : end]
        self.pos = end
        return value

    def _strip_space(self) -> None:
        if self.has_tag and not self.non_space:
            for index in self.spaces:
                self.tokens[index] = None
        self.spaces = []
        self.has_tag = self.non_space = False

    def _add_text(self, value: str) -> None:
        for char in value:
            if char.isspace():
                self.spaces.append(len(self.tokens))
            else:
                self.non_space = True
            self.tokens.append(Token("text", char))
            if char == "\n":
                self._strip_space()

    def run(self) -> list[Token]:
        sections: list[Token] = []
        while self.pos < len(self.text):
            start = self.pos
            self._add_text(self._scan_until(self.opening))
            if not self._scan(self.opening):
                break
            self.has_tag = True
            token = self._tag()
            if token.type in ("#", "^"):
                sections.append(token)
            elif token.type == "/":
                self._close(sections, token, start)
            elif token.type in ("name", "&"):
                self.non_space = True
            elif token.type == "=":
                self._set_delimiters(token.value)
        if sections:
            raise uncaught(f'Unclosed section "{sections[-1].value}" at {self.pos}')
        return _nest([t for t in self.tokens if t is not None])

    def _set_delimiters(self, value: str) -> None:
        parts = value.split()[:2]
        if len(parts) != 2:
            raise uncaught(f"Invalid tags: {','.join(parts)}")
        self._compile((parts[0], parts[1]))

    def _tag(self) -> Token:
        kind = self._scan(_TAG_TYPE) or "name"
        self._scan(re.compile(r"\s*"))
        if kind == "=":
            value = self._scan_until(re.compile(r"\s*="))
            self._scan(re.compile(r"\s*="))
            self._scan_until(self.closing)
        elif kind == "{":
            value = self._scan_until(self.closing_curly)
            self._scan(re.compile(r"\s*\}"))
            self._scan_until(self.closing)
            kind = "&"
        else:
            value = self._scan_until(self.closing)
        if not self._scan(self.closing):
            raise uncaught(f"Unclosed tag at {self.pos}")
        token = Token(kind, value)
        self.tokens.append(token)
        return token

    @staticmethod
    def _close(sections: list[Token], token: Token, start: int) -> None:
        if not sections:
            raise uncaught(f'Unopened section "{token.value}" at {start}')
        opened = sections.pop().value
        if opened != token.value:
            raise uncaught(f'Unclosed section "{opened}" at {start}')


def _nest(tokens: list[Token]) -> list[Token]:
    nested: list[Token] = []
    stack: list[list[Token]] = [nested]
    merged: list[Token] = []
    for token in tokens:  # squashTokens: consecutive text becomes one token
        if token.type == "text" and merged and merged[-1].type == "text":
            merged[-1] = Token("text", merged[-1].value + token.value)
        else:
            merged.append(token)
    for token in merged:
        if token.type in ("#", "^"):
            stack[-1].append(token)
            stack.append(token.children)
        elif token.type == "/":
            stack.pop()
        else:
            stack[-1].append(token)
    return nested


def _js_get(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return value.get(key, jscompat.UNDEFINED)
    if isinstance(value, list | str):
        if key == "length":
            return len(value)
        if key.isdigit() and int(key) < len(value):
            return value[int(key)]
    return jscompat.UNDEFINED


def lookup(view: dict[str, Any], name: str) -> Any:
    """mustache.js ``Context.lookup`` for one context: dotted names descend, strings and arrays have ``length``."""
    if name.find(".") <= 0:
        return view.get(name, jscompat.UNDEFINED)
    value: Any = view
    for part in name.split("."):
        if value is None or value is jscompat.UNDEFINED:
            break
        value = _js_get(value, part)
    return value


def render_pai(template: str, view: dict[str, Any]) -> str:
    """The rest server's ``render``: resolved names become their string, the others stay as ``<% name %>``."""
    result = ""
    for token in parse(template):
        if token.type == "text":
            result += token.value
        elif token.type == "name":
            name = re.sub(r"\[(\d+)\]", r".\1", token.value)
            value = lookup(view, name)
            result += (
                f"<% {name} %>" if value is None or value is jscompat.UNDEFINED else jscompat.string(value)
            )
    return result.strip()


def render_secrets(command: str, secrets: Any) -> str:
    """The runtime's ``render_string_with_secrets``: unchanged without secrets, else pystache-rendered."""
    if not secrets:
        return command
    view = {"$secrets": _index_lists(secrets)}
    result = ""
    for token in parse(command):
        if token.type == "text":
            result += token.value
        elif token.type in ("name", "&"):
            value = lookup(view, re.sub(r"\[(\d+)\]", r".\1", token.value))
            text = "" if value is None or value is jscompat.UNDEFINED else str(value)
            result += html.escape(text, quote=True) if token.type == "name" else text
    return result


def _index_lists(value: Any) -> Any:
    if isinstance(value, list):
        return {str(i): _index_lists(item) for i, item in enumerate(value)}
    if isinstance(value, dict):
        return {key: _index_lists(item) for key, item in value.items()}
    return value


__all__ = ["Token", "lookup", "parse", "render_pai", "render_secrets"]
