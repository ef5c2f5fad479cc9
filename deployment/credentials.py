"""``python -m deployment.credentials``: a CA, the SuperLink's TLS certificate and SuperNode key pairs.

Written with Python's ``cryptography`` (a Flower dependency), no OpenSSL or ssh-keygen needed:

- ``ca.crt`` / ``ca.key``: a self-signed certificate authority. ``ca.crt`` goes to every SuperNode and to
  the machine running ``flwr`` (it verifies the SuperLink); ``ca.key`` stays offline.
- ``superlink.crt`` / ``superlink.key``: the SuperLink's certificate, signed by the CA, valid for the
  host names and IP addresses given with ``--host`` (the addresses SuperNodes connect to) and always for
  127.0.0.1, where the SuperLink's Control API answers ``flwr`` (deployment/loopback_gate.py).
- ``supernode-<i>`` / ``supernode-<i>.pub``: one EC (SECP384R1) key pair per SuperNode in OpenSSH format,
  the form Flower's SuperNode authentication reads. The public key is registered with
  ``flwr supernode register``; the private key never leaves its device.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import os
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CERT_DAYS = 365
CONTROL_HOST = "127.0.0.1"


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fedft"), x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    )


def _validity(builder: x509.CertificateBuilder, days: int) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.timezone.utc)
    return builder.not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(
        now + datetime.timedelta(days=days)
    )


def make_ca(days: int = CERT_DAYS) -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    """A self-signed certificate authority."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name("fedft CA"))
        .issuer_name(_name("fedft CA"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
    )
    return key, _validity(builder, days).sign(key, hashes.SHA256())


def _subject_alternative_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def make_server_certificate(
    ca_key: rsa.RSAPrivateKey, ca_cert: x509.Certificate, hosts: Sequence[str], days: int = CERT_DAYS
) -> tuple[rsa.RSAPrivateKey, x509.Certificate]:
    """The SuperLink's key and certificate, signed by the CA, valid for ``hosts`` (names or IP addresses)."""
    if not hosts:
        raise ValueError("the SuperLink certificate needs at least one host name or IP address")
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(hosts[0]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .add_extension(x509.SubjectAlternativeName(_subject_alternative_names(hosts)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    )
    return key, _validity(builder, days).sign(ca_key, hashes.SHA256())


def make_node_key() -> ec.EllipticCurvePrivateKey:
    """A SuperNode's authentication key (Flower expects an EC key on a NIST curve)."""
    return ec.generate_private_key(ec.SECP384R1())


def _pem_key(key) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.write_bytes(data)
    if private:
        os.chmod(path, 0o600)


def write_credentials(out: Path, hosts: Sequence[str], num_supernodes: int, days: int = CERT_DAYS) -> list[Path]:
    """Write the CA, the SuperLink's certificate and ``num_supernodes`` key pairs into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    ca_key, ca_cert = make_ca(days)
    link_key, link_cert = make_server_certificate(ca_key, ca_cert, hosts, days)
    _write(out / "ca.crt", ca_cert.public_bytes(serialization.Encoding.PEM))
    _write(out / "ca.key", _pem_key(ca_key), private=True)
    _write(out / "superlink.crt", link_cert.public_bytes(serialization.Encoding.PEM))
    _write(out / "superlink.key", _pem_key(link_key), private=True)
    for i in range(num_supernodes):
        key = make_node_key()
        private = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
        )
        public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        _write(out / f"supernode-{i}", private, private=True)
        _write(out / f"supernode-{i}.pub", public + b"\n")
    return sorted(out.iterdir())


def public_key_lines(public_key_file: Path) -> list[str]:
    """The base64 lines of an OpenSSH public key file's PEM form (SubjectPublicKeyInfo): how Flower's SuperLink names
    a key in its log when it refuses a SuperNode that holds it."""
    key = serialization.load_ssh_public_key(public_key_file.read_bytes())
    pem = key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return [line for line in pem.splitlines() if line and not line.startswith("-----")]


def certificate_hosts(hosts: Sequence[str]) -> list[str]:
    """``hosts`` (default: localhost) and 127.0.0.1, the only address the gated SuperLink's Control API answers on."""
    named = list(hosts) or ["localhost"]
    return named if CONTROL_HOST in named else [*named, CONTROL_HOST]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deployment.credentials",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="folder to write the files into")
    parser.add_argument(
        "--host",
        action="append",
        default=[],
        help="SuperLink host name or IP for SuperNodes (repeatable; default localhost); 127.0.0.1 is always added",
    )
    parser.add_argument("--supernodes", type=int, default=2, help="SuperNode key pairs to create (default 2)")
    parser.add_argument("--days", type=int, default=CERT_DAYS, help=f"certificate validity (default {CERT_DAYS})")
    args = parser.parse_args(argv)
    for path in write_credentials(args.out, certificate_hosts(args.host), args.supernodes, args.days):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
