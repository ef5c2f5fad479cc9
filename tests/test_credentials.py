"""Deployment credentials: the CA signs a SuperLink certificate for the given hosts; node keys are what
Flower's SuperNode authentication loads."""

from __future__ import annotations

import ipaddress
import stat
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec, padding
from cryptography.hazmat.primitives.serialization import (
    load_ssh_private_key,
    load_ssh_public_key,
)

from deployment.credentials import certificate_hosts, main, write_credentials


def test_credentials_chain_and_keys(tmp_path: Path) -> None:
    write_credentials(tmp_path, ["127.0.0.1", "superlink.example"], num_supernodes=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "ca.crt",
        "ca.key",
        "superlink.crt",
        "superlink.key",
        "supernode-0",
        "supernode-0.pub",
        "supernode-1",
        "supernode-1.pub",
    ]
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    link = x509.load_pem_x509_certificate((tmp_path / "superlink.crt").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert link.issuer == ca.subject
    ca.public_key().verify(
        link.signature, link.tbs_certificate_bytes, padding.PKCS1v15(), link.signature_hash_algorithm
    )
    names = link.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1")]
    assert names.get_values_for_type(x509.DNSName) == ["superlink.example"]

    private = load_ssh_private_key((tmp_path / "supernode-0").read_bytes(), None)
    public = load_ssh_public_key((tmp_path / "supernode-0.pub").read_bytes())
    assert isinstance(private, ec.EllipticCurvePrivateKey) and isinstance(private.curve, ec.SECP384R1)
    assert private.public_key().public_numbers() == public.public_numbers()
    for secret in ("ca.key", "superlink.key", "supernode-0"):
        assert stat.S_IMODE((tmp_path / secret).stat().st_mode) == 0o600


def test_certificate_always_covers_the_loopback_control_address(tmp_path: Path) -> None:
    assert certificate_hosts([]) == ["localhost", "127.0.0.1"]
    assert certificate_hosts(["superlink.example", "127.0.0.1"]) == ["superlink.example", "127.0.0.1"]
    assert main(["--out", str(tmp_path), "--host", "superlink.example", "--host", "10.0.0.5", "--supernodes", "0"]) == 0
    link = x509.load_pem_x509_certificate((tmp_path / "superlink.crt").read_bytes())
    names = link.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("10.0.0.5"),
        ipaddress.ip_address("127.0.0.1"),
    ]
    assert names.get_values_for_type(x509.DNSName) == ["superlink.example"]
