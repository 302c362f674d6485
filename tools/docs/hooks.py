"""mkdocs hooks of mcr's documentation site.

The API reference must show no raw Sphinx role (``:class:`X```): the griffe extension
``griffe_roles.py`` turns them into cross-references, and a role it missed fails the strict build
here, naming the page and the role.
"""

from __future__ import annotations

import logging
import re
from typing import Any

log = logging.getLogger("mkdocs.plugins.mcr_roles")

RAW_ROLE = re.compile(r":(?:py:)?(?:class|meth|func|attr|data|mod|exc|obj|const|type):(?:`|<code>)")


def on_page_content(html: str, page: Any, **kwargs: Any) -> str:
    found = sorted(set(RAW_ROLE.findall(html)))
    if found:
        log.warning("%s shows raw Sphinx roles: %s", page.file.src_uri, ", ".join(found))
    return html
