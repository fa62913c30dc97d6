#!/bin/sh
# Test-only PKI for the egress proxy's integration tests: a trusted CA with a leaf for
# *.latch.test and latch.test, and a second, untrusted CA with the same names for TLS-failure tests.
# Run from anywhere; writes PEM files beside this script. Never use these keys outside tests.
set -eu
cd "$(dirname "$0")"
OPENSSL="${OPENSSL:-/usr/bin/openssl}"
DAYS=36500
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

cat >"$WORK/ca.ext" <<'EXT'
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EXT

cat >"$WORK/leaf.ext" <<'EXT'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:*.latch.test, DNS:latch.test
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EXT

# Fake providers (test-only): the real API and token hosts of DECISIONS "Providers" and AWS, so
# that loopback origins can stand in for them through EGRESS_CONNECT_TO and EGRESS_EXTRA_CA.
cat >"$WORK/providers.ext" <<'EXT'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:accounts.spotify.com, DNS:api.spotify.com, DNS:github.com, DNS:api.github.com, DNS:accounts.google.com, DNS:oauth2.googleapis.com, DNS:www.googleapis.com, DNS:gmail.googleapis.com, DNS:slack.com, DNS:connect.stripe.com, DNS:api.stripe.com, DNS:*.amazonaws.com, DNS:*.eu-west-1.amazonaws.com, DNS:*.s3.eu-west-1.amazonaws.com
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EXT

# make_pair NAME [EXT]: NAME-ca.pem and NAME-leaf.pem/NAME-leaf-key.pem (P-256). The CA key stays in the
# temporary folder and is deleted: nobody can mint more certificates under a CA a test trusts.
make_pair() {
  name="$1"
  ext="${2:-$WORK/leaf.ext}"
  "$OPENSSL" ecparam -name prime256v1 -genkey -noout -out "$WORK/ca.key"
  "$OPENSSL" req -new -key "$WORK/ca.key" -subj "/CN=Latch test CA ($name)" -out "$WORK/ca.csr"
  "$OPENSSL" x509 -req -in "$WORK/ca.csr" -signkey "$WORK/ca.key" -days "$DAYS" -sha256 \
    -extfile "$WORK/ca.ext" -out "$name-ca.pem"

  "$OPENSSL" ecparam -name prime256v1 -genkey -noout -out "$WORK/leaf.key"
  "$OPENSSL" pkcs8 -topk8 -nocrypt -in "$WORK/leaf.key" -out "$name-leaf-key.pem"
  "$OPENSSL" req -new -key "$name-leaf-key.pem" -subj "/CN=latch.test" -out "$WORK/leaf.csr"
  "$OPENSSL" x509 -req -in "$WORK/leaf.csr" -CA "$name-ca.pem" -CAkey "$WORK/ca.key" \
    -set_serial "0x$("$OPENSSL" rand -hex 16)" -days "$DAYS" -sha256 -extfile "$ext" -out "$name-leaf.pem"
}

# `./generate.sh providers` writes the providers pair only; no argument writes all three.
if [ "${1:-}" != providers ]; then
  make_pair trusted
  make_pair untrusted
fi
make_pair providers "$WORK/providers.ext"
echo "test PKI written to $(pwd)"
