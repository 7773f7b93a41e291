"""Kubernetes name and label rules with apimachinery's messages (``k8s.io/apimachinery/pkg/util/validation``).

Each check returns the list of messages Go returns (empty when the value is fine); callers wrap them in
field errors.
"""

from __future__ import annotations

import re
from typing import Any

from . import fielderrors as fe

_DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN = _DNS1123_LABEL + r"(\." + _DNS1123_LABEL + ")*"
_DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _QUALIFIED_NAME + ")?"
_ENV_VAR_NAME = "[-._a-zA-Z][-._a-zA-Z0-9]*"


def regex_error(message: str, pattern: str, *examples: str) -> str:
    if not examples:
        return f"{message} (regex used for validation is '{pattern}')"
    text = message + " (e.g. "
    for index, example in enumerate(examples):
        if index:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{pattern}')"


def max_len(length: int) -> str:
    return f"must be no more than {length} characters"


def _check(value: str, pattern: str, limit: int, message: str, *examples: str) -> list[str]:
    errors = []
    if len(value) > limit:
        errors.append(max_len(limit))
    if not re.fullmatch(pattern, value):
        errors.append(regex_error(message, pattern, *examples))
    return errors


def dns1123_label(value: str) -> list[str]:
    message = (
        "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
        "and must start and end with an alphanumeric character"
    )
    return _check(value, _DNS1123_LABEL, 63, message, "my-name", "123-abc")


def dns1123_subdomain(value: str) -> list[str]:
    message = (
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
        "and must start and end with an alphanumeric character"
    )
    return _check(value, _DNS1123_SUBDOMAIN, 253, message, "example.com")


def dns1035_label(value: str) -> list[str]:
    message = (
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
        "start with an alphabetic character, and end with an alphanumeric character"
    )
    return _check(value, _DNS1035_LABEL, 63, message, "my-name", "abc-123")


def label_value(value: str) -> list[str]:
    message = (
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character"
    )
    return _check(value, _LABEL_VALUE, 63, message, "MyValue", "my_value", "12345")


def qualified_name(value: str) -> list[str]:
    parts = value.split("/")
    name_message = (
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
        "alphanumeric character"
    )
    if len(parts) > 2:
        return [
            regex_error("a qualified name " + name_message, _QUALIFIED_NAME, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    errors = []
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errors.append("prefix part must be non-empty")
        else:
            errors.extend("prefix part " + message for message in dns1123_subdomain(prefix))
    else:
        name = parts[0]
    if not name:
        errors.append("name part must be non-empty")
    elif len(name) > 63:
        errors.append("name part " + max_len(63))
    if name and not re.fullmatch(_QUALIFIED_NAME, name):
        errors.append(
            regex_error("name part " + name_message, _QUALIFIED_NAME, "MyName", "my.name", "123-abc")
        )
    return errors


def env_var_name(value: str) -> list[str]:
    message = (
        "a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', "
        "and must not start with a digit"
    )
    if re.fullmatch(_ENV_VAR_NAME, value):
        return []
    return [regex_error(message, _ENV_VAR_NAME, "my.env-name", "MY_ENV.NAME", "MyEnvName1")]


def validate_object_meta(
    meta: dict[str, Any], *, namespaced: bool, name_check: Any = dns1123_subdomain
) -> list:
    """``ValidateObjectMetaAccessor``: name, namespace, labels and annotations keys."""
    errors: list[fe.FieldError] = []
    name = meta.get("name") or ""
    if not name:
        errors.append(fe.required("metadata.name", "name or generateName is required"))
    else:
        errors.extend(fe.invalid("metadata.name", name, msg) for msg in name_check(name))
    if namespaced and not meta.get("namespace"):
        errors.append(fe.required("metadata.namespace"))
    for label, value in (meta.get("labels") or {}).items():
        errors.extend(fe.invalid("metadata.labels", label, msg) for msg in qualified_name(label))
        if not isinstance(value, str):
            errors.append(fe.invalid(f"metadata.labels[{label}]", value, "must be a string"))
            continue
        errors.extend(fe.invalid("metadata.labels", value, msg) for msg in label_value(value))
    for annotation in meta.get("annotations") or {}:
        errors.extend(
            fe.invalid("metadata.annotations", annotation, msg) for msg in qualified_name(annotation)
        )
    return errors
