"""Label and field selectors: the ``labelSelector`` and ``fieldSelector`` query parameters.

Label selectors follow ``k8s.io/apimachinery/pkg/labels``: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
``a notin (x)``, ``a`` (exists), ``!a``, ``a>1``, ``a<1``, all joined by commas (AND). Field selectors
support ``=``, ``==`` and ``!=`` on the fields each resource declares.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .errors import ApiError, bad_request


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # =, !=, in, notin, exists, !, gt, lt
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        value = labels.get(self.key)
        if self.operator in ("=", "in"):
            return present and value in self.values
        if self.operator in ("!=", "notin"):
            return not present or value not in self.values
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        try:
            number = int(value) if value is not None else None
        except ValueError:
            return False
        limit = int(self.values[0])
        return number is not None and (number > limit if self.operator == "gt" else number < limit)


LabelSelector = list[Requirement]

_TOKEN = re.compile(r"\s*(!=|==|=|!|\(|\)|,|>|<|[^\s!=,()<>]+)")


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None or not match.group(1):
            if text[position:].strip():
                raise bad_request(f"unable to parse requirement: invalid label selector {text!r}")
            break
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def parse_labels(text: str | None) -> LabelSelector:
    if not text:
        return []
    tokens, requirements, index = _tokens(text), [], 0
    while index < len(tokens):
        requirement, index = _parse_one(tokens, index, text)
        requirements.append(requirement)
        if index < len(tokens):
            if tokens[index] != ",":
                raise bad_request(f"unable to parse requirement: found '{tokens[index]}', expected: ','")
            index += 1
    return requirements


def _parse_one(tokens: list[str], index: int, text: str) -> tuple[Requirement, int]:
    if tokens[index] == "!":
        return Requirement(_key(tokens, index + 1, text), "!"), index + 2
    key = _key(tokens, index, text)
    index += 1
    if index >= len(tokens) or tokens[index] == ",":
        return Requirement(key, "exists"), index
    operator = tokens[index]
    if operator in ("=", "==", "!=", ">", "<"):
        if index + 1 >= len(tokens) or tokens[index + 1] in ",()":
            value, index = "", index + 1
        else:
            value, index = tokens[index + 1], index + 2
        name = {"==": "=", ">": "gt", "<": "lt"}.get(operator, operator)
        return Requirement(key, name, (value,)), index
    if operator in ("in", "notin"):
        values, index = _set(tokens, index + 1, text)
        return Requirement(key, operator, values), index
    raise bad_request(
        f"unable to parse requirement: found '{operator}', expected: in, notin, =, ==, !=, gt, lt"
    )


def _key(tokens: list[str], index: int, text: str) -> str:
    if index >= len(tokens) or tokens[index] in "(),=!<>":
        raise bad_request(f"unable to parse requirement: invalid label selector {text!r}")
    return tokens[index]


def _set(tokens: list[str], index: int, text: str) -> tuple[tuple[str, ...], int]:
    if index >= len(tokens) or tokens[index] != "(":
        raise bad_request("unable to parse requirement: found '', expected: '('")
    values: list[str] = []
    index += 1
    while index < len(tokens) and tokens[index] != ")":
        if tokens[index] != ",":
            values.append(tokens[index])
        index += 1
    if index >= len(tokens):
        raise bad_request(f"unable to parse requirement: invalid label selector {text!r}")
    return tuple(values), index + 1


def labels_match(selector: LabelSelector, labels: Mapping[str, str] | None) -> bool:
    return all(requirement.matches(labels or {}) for requirement in selector)


# ---- field selectors ------------------------------------------------------------------------------------

FieldGetter = Callable[[dict[str, Any]], str]

COMMON_FIELDS: dict[str, FieldGetter] = {
    "metadata.name": lambda o: o["metadata"].get("name", ""),
    "metadata.namespace": lambda o: o["metadata"].get("namespace", ""),
}


def _get(*path: str) -> FieldGetter:
    def getter(obj: dict[str, Any]) -> str:
        value: Any = obj
        for part in path:
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)

    return getter


POD_FIELDS: dict[str, FieldGetter] = {
    **COMMON_FIELDS,
    "spec.nodeName": _get("spec", "nodeName"),
    "spec.restartPolicy": _get("spec", "restartPolicy"),
    "spec.schedulerName": _get("spec", "schedulerName"),
    "spec.serviceAccountName": _get("spec", "serviceAccountName"),
    "spec.hostNetwork": _get("spec", "hostNetwork"),
    "status.phase": _get("status", "phase"),
    "status.podIP": _get("status", "podIP"),
    "status.nominatedNodeName": _get("status", "nominatedNodeName"),
}

SECRET_FIELDS: dict[str, FieldGetter] = {**COMMON_FIELDS, "type": _get("type")}
EVENT_FIELDS: dict[str, FieldGetter] = {
    **COMMON_FIELDS,
    "involvedObject.name": _get("involvedObject", "name"),
    "involvedObject.kind": _get("involvedObject", "kind"),
    "involvedObject.uid": _get("involvedObject", "uid"),
    "reason": _get("reason"),
    "type": _get("type"),
}

FieldSelector = list[tuple[FieldGetter, bool, str]]  # (getter, equal?, value)


def parse_fields(text: str | None, fields: Mapping[str, FieldGetter]) -> FieldSelector:
    if not text:
        return []
    selector: FieldSelector = []
    for term in text.split(","):
        match = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*", term)
        if match is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{term}'")
        field, operator, value = match.groups()
        if field not in fields:
            raise ApiError(400, "BadRequest", f"field label not supported: {field}")
        selector.append((fields[field], operator != "!=", value))
    return selector


def fields_match(selector: FieldSelector, obj: dict[str, Any]) -> bool:
    return all((getter(obj) == value) == equal for getter, equal, value in selector)
