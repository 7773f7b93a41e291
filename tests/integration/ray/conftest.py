"""Fixtures for the Ray platform tests: one real Ray cluster (a head and a second node) for the whole session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from ray_cluster import HEAD_IP, NODE_IP, RAY, RayCluster


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[RayCluster]:
    """The running cluster. Tests that take a node down bring it back (:func:`healthy_cluster`)."""
    if RAY is None:
        pytest.fail("the Ray tests need the ray command: pip install 'ray[default]' (the test extra has it)")
    cluster = RayCluster()
    try:
        try:
            cluster.start()
        except RuntimeError as exc:
            pytest.fail(f"the Ray cluster did not start: {exc}")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def healthy_cluster(ray_cluster: RayCluster) -> RayCluster:
    """The cluster with both nodes up: what an earlier test took down is started again first (not after that
    test, so that the session's last test, which restarts the head, costs no restart nobody needs)."""
    alive = ray_cluster.alive_nodes().values()
    if not ray_cluster.head.running or HEAD_IP not in alive:
        ray_cluster.node.stop()
        ray_cluster.head.stop()
        ray_cluster.start()
    elif not ray_cluster.node.running or NODE_IP not in alive:
        ray_cluster.node.stop()  # a node whose head restarted under it leaves on its own, or hangs on
        ray_cluster.start_node()
    return ray_cluster
