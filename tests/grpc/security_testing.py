"""Credentials for the security tests: a certificate authority and certificates made with the `openssl` tool, API key
files, and JWTs signed here (RS256, ES256 with python3-cryptography; HS256 with hmac) with their JSON Web Key Set."""

import base64
import hashlib
import hmac
import json
import os
import subprocess
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_bytes(value, size=None):
    size = size or (value.bit_length() + 7) // 8
    return value.to_bytes(size, "big")


def _openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


class CertificateAuthority:
    """A CA in `directory` that signs server and client certificates (EC P-256 keys: quick to make)."""

    def __init__(self, directory, name="weft-test-ca"):
        self.directory = directory
        self.name = name
        self.cert = os.path.join(directory, f"{name}.crt")
        self.key = os.path.join(directory, f"{name}.key")
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                 "-subj", f"/CN={name}", "-keyout", self.key, "-out", self.cert, cwd=directory)
        self._serial = 0

    def issue(self, stem, subject, server=True):
        """(cert path, key path) of a new certificate; a server one is for localhost and 127.0.0.1."""
        self._serial += 1
        cert = os.path.join(self.directory, f"{stem}.crt")
        key = os.path.join(self.directory, f"{stem}.key")
        csr = os.path.join(self.directory, f"{stem}.csr")
        ext = os.path.join(self.directory, f"{stem}.ext")
        with open(ext, "w") as f:
            if server:
                f.write("subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
            else:
                f.write("extendedKeyUsage=clientAuth\n")
        _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", subject,
                 "-keyout", key, "-out", csr, cwd=self.directory)
        _openssl("x509", "-req", "-in", csr, "-CA", self.cert, "-CAkey", self.key, "-days", "2", "-out", cert,
                 "-extfile", ext, "-set_serial", str(int(time.time() * 1000) * 100 + self._serial),
                 cwd=self.directory)
        return cert, key


def read(path):
    with open(path, "rb") as f:
        return f.read()


def replace_file(path, data):
    """Writes `path` whole, atomically (a rename), as a secret manager's mount does."""
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    os.replace(tmp, path)


def key_entry(key_id, secret, scopes, **extra):
    return {"id": key_id, "sha256": hashlib.sha256(secret.encode()).hexdigest(), "scopes": scopes, **extra}


def key_file(path, entries):
    replace_file(path, json.dumps({"keys": entries}))
    return path


class JwtSigner:
    """Three signing keys (RSA, P-256, a shared secret), their JWKS, and tokens signed with any of them."""

    def __init__(self):
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.secret = os.urandom(32)
        self.other_rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # not in the JWKS

    def rsa_public_pem(self):
        return self.rsa.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo)

    def jwks(self):
        rsa_numbers = self.rsa.public_key().public_numbers()
        ec_numbers = self.ec.public_key().public_numbers()
        return {"keys": [
            {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": b64url(_int_bytes(rsa_numbers.n)),
             "e": b64url(_int_bytes(rsa_numbers.e))},
            {"kty": "EC", "kid": "ec-1", "crv": "P-256", "x": b64url(_int_bytes(ec_numbers.x, 32)),
             "y": b64url(_int_bytes(ec_numbers.y, 32))},
            {"kty": "oct", "kid": "hs-1", "k": b64url(self.secret)},
        ]}

    def token(self, alg="RS256", kid=None, signing_key=None, **claims):
        """A compact JWS. Claims default to a valid token for issuer "weft-tests" and audience "weft"."""
        now = int(time.time())
        body = {"iss": "weft-tests", "aud": "weft", "sub": "tester", "exp": now + 600, "iat": now}
        body.update(claims)
        body = {k: v for k, v in body.items() if v is not None}
        kid = kid or {"RS256": "rsa-1", "ES256": "ec-1", "HS256": "hs-1", "none": None}[alg]
        header = {"alg": alg, "typ": "JWT"}
        if kid:
            header["kid"] = kid
        signing_input = (b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(body).encode())).encode()
        if alg == "none":
            return signing_input.decode() + "."
        if alg == "RS256":
            signature = (signing_key or self.rsa).sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        elif alg == "ES256":
            r, s = decode_dss_signature((signing_key or self.ec).sign(signing_input, ec.ECDSA(hashes.SHA256())))
            signature = _int_bytes(r, 32) + _int_bytes(s, 32)
        else:
            signature = hmac.new(signing_key or self.secret, signing_input, hashlib.sha256).digest()
        return signing_input.decode() + "." + b64url(signature)
