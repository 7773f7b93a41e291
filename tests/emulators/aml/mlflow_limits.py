"""What the workspace's MLflow refuses, as the real service does (400 ``INVALID_PARAMETER_VALUE``).

Two sources, the stricter one winning:

* MLflow's own request limits, ``mlflow/utils/validation.py`` (``MAX_PARAMS_TAGS_PER_BATCH = 100``,
  ``MAX_METRICS_PER_BATCH = 1000``, ``MAX_ENTITIES_PER_BATCH = 1000``, ``MAX_BATCH_LOG_REQUEST_SIZE = int(1e6)``,
  ``MAX_ENTITY_KEY_LENGTH = 250``, ``MAX_TAG_VAL_LENGTH = 5000``), with its messages;
* Azure ML's documented limits of a run ("Service limits in Azure Machine Learning",
  learn.microsoft.com/azure/machine-learning/resource-limits-capacity: Runs — number of tags 50, length of tag
  key 100, length of tag value 1,000 characters; Metrics — metric names per run 50, metric rows per batch 250).
  A job's tags are its run's tags: they count.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from .wire import HttpError, Response

MAX_PARAMS_TAGS_PER_BATCH = 100
MAX_METRICS_PER_BATCH = 250  # Azure: metric rows per batch uploaded (MLflow's own: 1000)
MAX_ENTITIES_PER_BATCH = 1000
MAX_BATCH_LOG_REQUEST_SIZE = int(1e6)
MAX_TAG_KEY_LENGTH = 100  # Azure (MLflow's own: 250)
MAX_TAG_VAL_LENGTH = 1000  # Azure (MLflow's own: 5000)
MAX_TAGS_PER_RUN = 50  # Azure
MAX_METRIC_NAMES_PER_RUN = 50  # Azure


def refused(message: str) -> HttpError:
    return HttpError(Response.json(400, {"error_code": "INVALID_PARAMETER_VALUE", "message": message}))


def check_batch(size: int, metrics: int, params: int, tags: int) -> None:
    if size > MAX_BATCH_LOG_REQUEST_SIZE:
        raise refused(
            f"Batched logging API requests must be at most {MAX_BATCH_LOG_REQUEST_SIZE} bytes, "
            f"got a request of size {size}."
        )
    for name, limit, count in (
        ("metrics", MAX_METRICS_PER_BATCH, metrics),
        ("params", MAX_PARAMS_TAGS_PER_BATCH, params),
        ("tags", MAX_PARAMS_TAGS_PER_BATCH, tags),
        ("metrics, params, and tags", MAX_ENTITIES_PER_BATCH, metrics + params + tags),
    ):
        if count > limit:
            raise refused(
                f"A batch logging request can contain at most {limit} {name}. Got {count} {name}. "
                f"Please split up {name} across multiple requests and try again."
            )


def check_tags(new: Mapping[str, str], existing: Collection[str]) -> None:
    """The tags to set, against the run's tags (its job's and those set before)."""
    for key, value in new.items():
        if len(key) > MAX_TAG_KEY_LENGTH:
            raise refused(f"Tag key '{key[:250]}' had length {len(key)}, which exceeded length limit of 100")
        if len(value) > MAX_TAG_VAL_LENGTH:
            raise refused(
                f"Tag value '{value[:250]}' had length {len(value)}, which exceeded length limit of 1000"
            )
    count = len(set(existing) | set(new))
    if count > MAX_TAGS_PER_RUN:
        raise refused(f"A run can have at most {MAX_TAGS_PER_RUN} tags; this request would make {count}.")


def check_metric_names(new: list[dict[str, Any]], existing: Collection[str]) -> None:
    names = set(existing) | {str(m["key"]) for m in new}
    if len(names) > MAX_METRIC_NAMES_PER_RUN:
        raise refused(f"A run can have at most {MAX_METRIC_NAMES_PER_RUN} metric names; got {len(names)}.")
