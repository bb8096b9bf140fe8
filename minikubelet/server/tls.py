"""The serving TLS of the kubelet API (upstream `cmd/kubelet/app/server.go` InitializeTLS).

`tlsCertFile`/`tlsPrivateKeyFile` when given; otherwise a self-signed certificate kept in
`<rootDir>/pki/kubelet.crt` and `kubelet.key` (made once, reused after restarts), as upstream does when
neither file nor serverTLSBootstrap is set. The API server does not verify it unless told to
(`--kubelet-certificate-authority`).

Client certificates are requested, never required (Go's RequestClientCert + verification against
`authentication.x509.clientCAFile`): a client without one reaches the authenticator and gets 401 there.
Unlike Go, Python's ssl fails the handshake on a certificate the CA did not sign instead of treating
the client as anonymous; either way such a client is refused.
"""

from __future__ import annotations

import os
import ssl

from minikubelet.config.tls_names import TLS_VERSIONS, openssl_cipher_list
from minikubelet.node import keygen

SELF_SIGNED_VALIDITY = keygen.SELF_SIGNED_VALIDITY


def self_signed_paths(root_dir: str) -> tuple[str, str]:
    pki = os.path.join(root_dir, "pki")
    return os.path.join(pki, "kubelet.crt"), os.path.join(pki, "kubelet.key")


def write_self_signed(cert_path: str, key_path: str, host: str, ips: list[str]) -> None:
    """A key and a self-signed certificate (host, localhost, `ips` and 127.0.0.1; SELF_SIGNED_VALIDITY)."""
    keygen.write_self_signed(cert_path, key_path, host, ips)


def tls_context(min_version: str = "", cipher_suites: tuple[str, ...] = ()) -> ssl.SSLContext:
    """A server context with `tlsMinVersion` and `tlsCipherSuites` (Go names) applied and no certificate yet."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion[TLS_VERSIONS[min_version]] if min_version else ssl.TLSVersion.TLSv1_2
    if cipher_suites:
        ciphers = openssl_cipher_list(cipher_suites)
        if ciphers:
            try:
                ctx.set_ciphers(ciphers)
            except ssl.SSLError:
                raise ValueError(f"tlsCipherSuites: none of {', '.join(cipher_suites)} is available in this "
                                 f"OpenSSL ({ssl.OPENSSL_VERSION})") from None
    return ctx


def serving_context(cert_file: str, key_file: str, client_ca_file: str, *, root_dir: str, host: str,
                    ips: list[str], min_version: str = "", cipher_suites: tuple[str, ...] = (),
                    bootstrap: bool = False) -> ssl.SSLContext:
    """`bootstrap` (serverTLSBootstrap): no certificate until the CSR is issued (the caller loads it); until
    then handshakes fail, as upstream's GetCertificate returning none."""
    ctx = tls_context(min_version, cipher_suites)
    if not bootstrap:
        if not cert_file or not key_file:
            cert_file, key_file = self_signed_paths(root_dir)
            if not (os.path.exists(cert_file) and os.path.exists(key_file)):
                write_self_signed(cert_file, key_file, host, ips)
        ctx.load_cert_chain(cert_file, key_file)
    if client_ca_file:
        ctx.load_verify_locations(cafile=client_ca_file)
        ctx.verify_mode = ssl.CERT_OPTIONAL
    # No ALPN, as the recorded kubelet: the API server then speaks HTTP/1.1 (which is all the listener serves).
    return ctx
