"""Submitting a job protocol: what ``middlewares/v2/protocol.js`` does to the request body, step for step.

1. ``yaml.safeLoad`` of the body (a YAML error is a 500 without code);
2. the ajv schema (400 ``InvalidProtocolError``, the message being ajv's error list as JSON);
3. prerequisites turned into a dict per type ("Duplicate <type> prerequisites <name>."), deployments into a dict
   ("Duplicate deployments <name>."), every prerequisite a task role names must exist ("Prerequisite X does not
   exist."), and ``defaults.deployment`` must name a deployment;
4. rendering: docker auth against ``$secrets``; each role's commands (deployment pre/post commands around them),
   trimmed, joined with newlines and rendered against ``$parameters``, ``$script``, ``$output``, ``$data`` into
   the role's ``entrypoint``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import jscompat
from .ajv import Validator
from .errors import PaiError, bad_request, uncaught
from .mustache import render_pai
from .schema import BASE_SCHEMA, PROTOCOL_SCHEMA

PREREQUISITE_TYPES = ("script", "output", "data", "dockerimage")
PREREQUISITE_FIELDS = ("script", "output", "data", "dockerImage")

_VALIDATOR = Validator(PROTOCOL_SCHEMA, BASE_SCHEMA)


@dataclass
class Protocol:
    """A validated and rendered job protocol, with the text it was submitted as."""

    raw: str
    spec: dict[str, Any]  # the loaded protocol, prerequisites and deployments as dicts, entrypoints added

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def task_roles(self) -> dict[str, dict[str, Any]]:
        return self.spec["taskRoles"]


def load(text: str) -> Any:
    try:
        return jscompat.load_yaml(text)
    except (
        Exception
    ) as error:  # js-yaml's exception is not an http error: express answers 500 with its message
        raise uncaught(_yaml_message(error)) from error


def _yaml_message(error: Exception) -> str:
    mark = getattr(error, "problem_mark", None) or getattr(error, "context_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    if mark is None:
        return str(problem)
    snippet = mark.get_snippet() or ""
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}:\n{snippet}"


def validate(obj: Any) -> dict[str, Any]:
    errors = _VALIDATOR.errors(obj)
    if errors:
        raise bad_request("InvalidProtocolError", jscompat.dumps(errors))
    roles = _task_roles(obj["taskRoles"])
    prerequisites: dict[str, dict[str, Any]] = {kind: {} for kind in PREREQUISITE_TYPES}
    names: set[str] = set()
    for item in obj.get("prerequisites", []):
        if item["name"] in prerequisites[item["type"]]:
            raise bad_request(
                "InvalidProtocolError", f"Duplicate {item['type']} prerequisites {item['name']}."
            )
        prerequisites[item["type"]][item["name"]] = item
        names.add(item["name"])
    obj["prerequisites"] = prerequisites
    deployments: dict[str, Any] = {}
    for item in obj.get("deployments", []):
        if item["name"] in deployments:
            raise bad_request("InvalidProtocolError", f"Duplicate deployments {item['name']}.")
        deployments[item["name"]] = item
    obj["deployments"] = deployments
    _check_references(roles, prerequisites, names)
    default = obj.get("defaults", {}).get("deployment", jscompat.UNDEFINED)
    if default is not jscompat.UNDEFINED and jscompat.string(default) not in deployments:
        raise bad_request(
            "InvalidProtocolError", f"Default deployment {jscompat.string(default)} does not exist."
        )
    obj["taskRoles"] = roles
    return obj


def _task_roles(value: Any) -> dict[str, Any]:
    """The schema gives ``taskRoles`` no type; JavaScript's ``Object.keys`` then decides what happens."""
    if isinstance(value, dict):
        return value
    if value is None:
        raise uncaught("Cannot convert undefined or null to object")
    if isinstance(value, str | list) and len(value) > 0:
        first = jscompat.string(value[0])
        raise uncaught(f"Cannot use 'in' operator to search for 'prerequisites' in {first}")
    return {}  # a number or a boolean has no keys: a job without task roles


def _check_references(
    roles: dict[str, Any], prerequisites: dict[str, dict[str, Any]], names: set[str]
) -> None:
    for role in roles.values():
        for name in role.get("prerequisites", []):
            if name not in names:
                raise bad_request("InvalidProtocolError", f"Prerequisite {name} does not exist.")
    for role in roles.values():
        for field in PREREQUISITE_FIELDS:
            if field in role and role[field] not in prerequisites[field.lower()]:
                raise bad_request("InvalidProtocolError", f"Prerequisite {role[field]} does not exist.")


def render(obj: dict[str, Any]) -> dict[str, Any]:
    secrets = obj.get("secrets", jscompat.UNDEFINED)
    for image in obj["prerequisites"]["dockerimage"].values():
        auth = image.get("auth")
        if isinstance(auth, dict):
            for key, value in auth.items():
                if isinstance(value, str):
                    auth[key] = render_pai(value, {"$secrets": secrets})
    deployment = None
    if "deployment" in obj.get("defaults", {}):
        deployment = obj["deployments"][obj["defaults"]["deployment"]]
    for name, role in obj["taskRoles"].items():
        commands = list(role["commands"])
        hooks = deployment["taskRoles"].get(name) if deployment is not None else None
        if hooks is not None:
            commands = list(hooks.get("preCommands", [])) + commands + list(hooks.get("postCommands", []))
        joined = "\n".join(command.strip() for command in commands)
        view = {
            "$parameters": obj.get("parameters", jscompat.UNDEFINED),
            "$script": obj["prerequisites"]["script"].get(role.get("script"), jscompat.UNDEFINED),
            "$output": obj["prerequisites"]["output"].get(role.get("output"), jscompat.UNDEFINED),
            "$data": obj["prerequisites"]["data"].get(role.get("data"), jscompat.UNDEFINED),
        }
        role["entrypoint"] = render_pai(joined, view)
    return obj


def submit(text: str) -> Protocol:
    """The protocol middleware chain of ``POST /api/v2/jobs`` for a text body."""
    obj = load(text)
    return Protocol(raw=text, spec=render(validate(obj)))


__all__ = ["PREREQUISITE_TYPES", "PaiError", "Protocol", "load", "render", "submit", "validate"]
