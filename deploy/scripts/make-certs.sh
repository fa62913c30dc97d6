#!/bin/sh
# The mTLS material between the two tiers: a private CA, the egress proxy's server certificate for
# the names the control plane dials, and the control plane's client certificate.
#   deploy/scripts/make-certs.sh OUT_DIR [EGRESS_NAME ...]   (default name: egress)
# Writes ca.pem, egress.pem, egress-key.pem, control-plane.pem, control-plane-key.pem (keys 0600).
# The CA key is deleted once both certificates are signed: nobody can mint another certificate
# the tiers would trust. Rotating means running this again and rolling both tiers.
set -eu
OUT="${1:?usage: make-certs.sh OUT_DIR [EGRESS_NAME ...]}"
shift
[ "$#" -gt 0 ] || set -- egress
OPENSSL="${OPENSSL:-openssl}"
DAYS="${CERT_DAYS:-825}"
umask 077
mkdir -p "$OUT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

SAN=""
for name in "$@"; do SAN="${SAN:+$SAN, }DNS:$name"; done

cat >"$WORK/ca.ext" <<'EXT'
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
EXT
cat >"$WORK/server.ext" <<EXT
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $SAN
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EXT
cat >"$WORK/client.ext" <<'EXT'
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
subjectAltName = DNS:latch-control-plane
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EXT

"$OPENSSL" ecparam -name prime256v1 -genkey -noout -out "$WORK/ca.key" 2>/dev/null
"$OPENSSL" req -new -key "$WORK/ca.key" -subj "/CN=Latch inter-tier CA" -out "$WORK/ca.csr"
"$OPENSSL" x509 -req -in "$WORK/ca.csr" -signkey "$WORK/ca.key" -days "$DAYS" -sha256 \
  -extfile "$WORK/ca.ext" -out "$OUT/ca.pem" 2>/dev/null

# leaf NAME CN EXTFILE: NAME.pem and NAME-key.pem (P-256, PKCS#8) signed by the CA.
leaf() {
  "$OPENSSL" ecparam -name prime256v1 -genkey -noout -out "$WORK/$1.key" 2>/dev/null
  "$OPENSSL" pkcs8 -topk8 -nocrypt -in "$WORK/$1.key" -out "$OUT/$1-key.pem"
  "$OPENSSL" req -new -key "$OUT/$1-key.pem" -subj "/CN=$2" -out "$WORK/$1.csr"
  "$OPENSSL" x509 -req -in "$WORK/$1.csr" -CA "$OUT/ca.pem" -CAkey "$WORK/ca.key" \
    -set_serial "0x$("$OPENSSL" rand -hex 16)" -days "$DAYS" -sha256 -extfile "$3" \
    -out "$OUT/$1.pem" 2>/dev/null
}
leaf egress "$1" "$WORK/server.ext"
leaf control-plane latch-control-plane "$WORK/client.ext"
chmod 600 "$OUT"/*-key.pem
chmod 644 "$OUT/ca.pem" "$OUT/egress.pem" "$OUT/control-plane.pem"
echo "mTLS material for $* written to $OUT"
