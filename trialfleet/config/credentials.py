"""What looks like a credential in a trial command or an environment (``AWS_SECRET_ACCESS_KEY=… python3
train.py``, ``--password x``), masked wherever the config is stored or shown, as the remote password is
(:mod:`trialfleet.storage.secrets` keeps the clear value for the manager only)."""

from __future__ import annotations

import re
from typing import Any

from trialfleet.config.base import SECRET_MASK

#: a name that says its value is secret: ``AWS_SECRET_ACCESS_KEY``, ``HF_TOKEN``, ``DB_PASSWORD``, ``api-key``
_SECRET_NAME = (
    r"[A-Za-z0-9_-]*(?:SECRET|PASSWORD|PASSWD|TOKEN|API[_-]?KEY|ACCESS[_-]?KEY|PRIVATE[_-]?KEY|CREDENTIALS?)"
    r"(?:[_-][A-Za-z0-9_-]*)?"
)
_VALUE = r"""(?:"[^"]*"|'[^']*'|[^\s;&|]+)"""
#: ``NAME=value`` (an environment assignment or a ``--name=value`` flag) and ``--name value``
_ASSIGNED = re.compile(rf"(?i)(?<![A-Za-z0-9_])({_SECRET_NAME}=){_VALUE}")
_FLAG = re.compile(rf"(?i)(--?{_SECRET_NAME}\s+)(?!-){_VALUE}")
_SECRET_KEY = re.compile(rf"(?i){_SECRET_NAME}")
#: config keys holding a command line, and keys holding an environment (name → value)
COMMAND_KEYS = frozenset({"trialCommand", "command"})


def mask_command(command: str) -> str:
    """``command`` with the value of every credential-looking assignment or flag replaced by ``******``."""
    return _FLAG.sub(rf"\1{SECRET_MASK}", _ASSIGNED.sub(rf"\1{SECRET_MASK}", command))


def is_secret_name(name: str) -> bool:
    return _SECRET_KEY.fullmatch(name) is not None


def mask_config(config: Any) -> Any:
    """A copy of a config's JSON with commands masked (:func:`mask_command`) and the credential-looking values
    of every environment (a mapping under a key with ``env`` in its name)."""
    if isinstance(config, list):
        return [mask_config(item) for item in config]
    if not isinstance(config, dict):
        return config
    masked: dict[str, Any] = {}
    for key, value in config.items():
        if key in COMMAND_KEYS and isinstance(value, str):
            value = mask_command(value)
        elif "env" in key.lower() and isinstance(value, dict):
            value = {k: SECRET_MASK if is_secret_name(k) and isinstance(v, str) else v for k, v in value.items()}
        elif key != "searchSpace":
            value = mask_config(value)
        masked[key] = value
    return masked
