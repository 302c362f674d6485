"""The REST client for any kind: typed ``kubernetes`` models or plain dicts.

``Client(transport)`` talks to one cluster; ``Client(transport, reader=cache)`` reads from the
informer cache and writes to the server. See :class:`Client` for the verbs.
"""

from __future__ import annotations

from mcr.client._client import Client, Reader, SubResourceClient
from mcr.client._options import PATCH_CONTENT_TYPES, PatchType, delete_options, write_query

__all__ = [
    "PATCH_CONTENT_TYPES",
    "Client",
    "PatchType",
    "Reader",
    "SubResourceClient",
    "delete_options",
    "write_query",
]
