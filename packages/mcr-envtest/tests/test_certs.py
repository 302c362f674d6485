"""Certificates pass strict X.509 verification (the default from Python 3.13 on)."""

from __future__ import annotations

import ssl
import urllib.request

from mcr_envtest import ServerThread


def test_serving_certificate_passes_strict_verification() -> None:
    with ServerThread() as srv:
        ctx = ssl.create_default_context(cafile=str(srv.ca_file))
        ctx.verify_flags |= ssl.VERIFY_X509_STRICT  # key identifiers and usage must be right
        req = urllib.request.Request(
            srv.url + "/version", headers={"Authorization": f"Bearer {srv.admin_token}"}
        )
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            assert resp.status == 200
