"""A throwaway CA plus serving and client certificates (ECDSA P-256: fast to generate).

The CA is generated once per process and cached (:func:`process_ca`), so starting many servers
stays fast; each server gets its own serving certificate for 127.0.0.1, ::1 and localhost.
"""

from __future__ import annotations

import datetime
import ipaddress
import threading
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["CA", "KeyPair", "process_ca"]


@dataclass(frozen=True)
class KeyPair:
    """PEM certificate and PEM (unencrypted PKCS#8) key."""

    cert_pem: bytes
    key_pem: bytes


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class CA:
    """A self-signed certificate authority that issues serving and client certificates."""

    def __init__(self, common_name: str = "mcr-envtest-ca") -> None:
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            # Key identifiers: strict X.509 verification (Python 3.13's default) requires them.
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self.cert.public_bytes(serialization.Encoding.PEM)

    def _issue(self, subject: x509.Name, *, server: bool, hosts: tuple[str, ...] = ()) -> KeyPair:
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        b = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage(
                    [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
                ),
                critical=False,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if hosts:
            sans: list[x509.GeneralName] = []
            for h in hosts:
                try:
                    sans.append(x509.IPAddress(ipaddress.ip_address(h)))
                except ValueError:
                    sans.append(x509.DNSName(h))
            b = b.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = b.sign(self._key, hashes.SHA256())
        return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _pem_key(key))

    def serving(self, hosts: tuple[str, ...] = ("127.0.0.1", "::1", "localhost")) -> KeyPair:
        """A serving certificate valid for ``hosts`` (IPs and DNS names)."""
        return self._issue(
            x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcr-envtest")]), server=True, hosts=hosts
        )

    def client(self, user: str, groups: tuple[str, ...] = ()) -> KeyPair:
        """A client certificate: CN = user name, O = groups (as kube-apiserver reads them)."""
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, user))
        return self._issue(x509.Name(attrs), server=False)


_ca: CA | None = None
_ca_lock = threading.Lock()


def process_ca() -> CA:
    """The CA shared by every server of this process (created on first use)."""
    global _ca
    with _ca_lock:
        if _ca is None:
            _ca = CA()
        return _ca
