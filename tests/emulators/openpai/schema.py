"""OpenPAI's job protocol schema (protocolVersion 2), transcribed from the rest server's ``config/v2/protocol.js``.

Kept key for key, quirks included, since the order of keys decides the order of ajv's errors: ``taskRoles`` has no
``type`` (a non-object passes the schema); ``extraContainerOptions.properties`` lists ``additionalProperties`` as
a property (so the object stays open, and a key named ``additionalProperties`` fails as a false schema);
``defaults`` and ``extras`` stay open objects.
"""

from __future__ import annotations

from typing import Any

NAME_PATTERN = "^[a-zA-Z0-9_-]+$"
ROLE_PATTERN = "^[a-zA-Z_][a-zA-Z0-9_]*$"

BASE_SCHEMA: dict[str, Any] = {
    "$id": "base.json",
    "type": "object",
    "properties": {
        "protocolVersion": {"enum": ["2", 2]},
        "name": {"type": "string", "pattern": NAME_PATTERN, "maxLength": 255},
        "version": {"type": ["string", "number"]},
        "contributor": {"type": "string"},
        "description": {"type": "string"},
    },
}


def _prerequisite(with_: dict[str, Any]) -> dict[str, Any]:
    return {"$merge": {"source": {"$ref": "base.json#"}, "with": with_}}


_STRINGS = {"type": "array", "items": {"type": "string"}}

_PREREQUISITES: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "oneOf": [
            _prerequisite(
                {
                    "properties": {
                        "type": {"type": "string", "enum": ["script", "output"]},
                        "plugin": {"type": "string"},
                        "require": _STRINGS,
                        "uri": {"type": "string"},
                    },
                    "required": ["name", "type"],
                    "additionalProperties": True,
                }
            ),
            _prerequisite(
                {
                    "properties": {
                        "type": {"type": "string", "enum": ["data"]},
                        "plugin": {"type": "string"},
                        "require": _STRINGS,
                        "uri": _STRINGS,
                    },
                    "required": ["name", "type"],
                    "additionalProperties": True,
                }
            ),
            _prerequisite(
                {
                    "properties": {
                        "type": {"type": "string", "enum": ["dockerimage"]},
                        "auth": {
                            "type": "object",
                            "properties": {
                                "username": {"type": "string"},
                                "password": {"type": "string"},
                                "registryuri": {"type": "string"},
                            },
                        },
                        "uri": {"type": "string"},
                    },
                    "required": ["name", "type", "uri"],
                    "additionalProperties": False,
                }
            ),
        ],
    },
    "minItems": 1,
}

_TASK_ROLE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "protocolVersion": {"$ref": "base.json#/properties/protocolVersion"},
        "instances": {"type": "integer", "minimum": 1},
        "completion": {
            "type": "object",
            "properties": {
                "minFailedInstances": {"type": ["integer", "null"]},
                "minSucceededInstances": {"type": ["integer", "null"]},
            },
            "additionalProperties": False,
        },
        "taskRetryCount": {"type": "integer"},
        "prerequisites": _STRINGS,
        "dockerImage": {"type": "string"},
        "data": {"type": "string"},
        "output": {"type": "string"},
        "script": {"type": "string"},
        "extraContainerOptions": {
            "type": "object",
            "properties": {"shmMB": {"type": "integer"}, "additionalProperties": False},
        },
        "resourcePerInstance": {
            "type": "object",
            "properties": {
                "cpu": {"type": "integer"},
                "memoryMB": {"type": "integer"},
                "gpu": {"type": "integer"},
                "ports": {
                    "patternProperties": {ROLE_PATTERN: {"type": "integer"}},
                    "minProperties": 1,
                    "additionalProperties": False,
                },
            },
            "required": ["cpu", "memoryMB", "gpu"],
            "additionalProperties": False,
        },
        "commands": {"type": "array", "items": {"type": "string"}, "minItems": 1},
    },
    "required": ["dockerImage", "resourcePerInstance", "commands"],
    "additionalProperties": False,
}

_COMMANDS = {"type": "array", "items": {"type": "string"}, "minItems": 1}

_DEPLOYMENTS: dict[str, Any] = {
    "type": "array",
    "items": {
        "type": "object",
        "properties": {
            "protocolVersion": {"$ref": "base.json#/properties/protocolVersion"},
            "name": {"$ref": "base.json#/properties/name"},
            "taskRoles": {
                "patternProperties": {
                    ROLE_PATTERN: {
                        "type": "object",
                        "properties": {"preCommands": _COMMANDS, "postCommands": _COMMANDS},
                        "additionalProperties": False,
                    }
                },
                "minProperties": 1,
                "additionalProperties": False,
            },
        },
        "required": ["name", "taskRoles"],
    },
    "minItems": 1,
}

PROTOCOL_SCHEMA: dict[str, Any] = {
    "$id": "protocol.json",
    "type": "object",
    "properties": {
        "protocolVersion": {"$ref": "base.json#/properties/protocolVersion"},
        "name": {"$ref": "base.json#/properties/name"},
        "type": {"type": "string", "enum": ["job"]},
        "version": {"$ref": "base.json#/properties/version"},
        "contributor": {"$ref": "base.json#/properties/contributor"},
        "description": {"$ref": "base.json#/properties/description"},
        "prerequisites": _PREREQUISITES,
        "parameters": {"type": "object", "additionalProperties": True},
        "secrets": {"type": "object", "additionalProperties": True},
        "jobRetryCount": {"type": "integer", "minimum": 0},
        "taskRoles": {
            "patternProperties": {ROLE_PATTERN: _TASK_ROLE},
            "minProperties": 1,
            "additionalProperties": False,
        },
        "deployments": _DEPLOYMENTS,
        "defaults": {"type": "object", "properties": {"deployment": {"type": "string"}}},
        "extras": {"type": "object"},
    },
    "required": ["protocolVersion", "name", "type", "taskRoles"],
    "additionalProperties": False,
}

__all__ = ["BASE_SCHEMA", "NAME_PATTERN", "PROTOCOL_SCHEMA", "ROLE_PATTERN"]
