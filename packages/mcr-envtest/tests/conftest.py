"""Shared helpers for mcr-envtest's own tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from mcr_envtest import ServerThread


def sync_client(kubeconfig: dict[str, Any]) -> client.ApiClient:
    """An official sync ApiClient for a kubeconfig dict."""
    return config.new_client_from_config_dict(kubeconfig)


def close_client(api: client.ApiClient) -> None:
    """Close an ApiClient including its urllib3 connections (ApiClient.close leaves them open)."""
    api.close()
    api.rest_client.pool_manager.clear()


@pytest.fixture
def api_client(apiserver: ServerThread) -> Iterator[client.ApiClient]:
    api = sync_client(apiserver.kubeconfig)
    yield api
    close_client(api)


@pytest.fixture
def core(api_client: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api_client)
