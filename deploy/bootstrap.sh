#!/bin/sh
# One command from a clone to a running single-host Latch (deploy/compose.yaml):
#   deploy/bootstrap.sh [--no-up]
# 1. mTLS certificates for the inter-tier link (deploy/scripts/make-certs.sh), one folder per tier
#    in deploy/secrets/certs (each tier mounts only its own key)
# 2. the key files (deploy/make-keys.ts), in deploy/secrets/keys (one folder per tier)
# 3. deploy/.env: the database passwords (the image's superuser, for your own maintenance; the
#    control plane's latch_control role; the proxies' latch_egress role),
#    the ticket public keys the proxies trust, SMTP_URL
# 4. docker compose up -d (unless --no-up)
# Rerunning keeps every existing key, certificate and password (delete a file to make a new one).
set -eu
cd "$(dirname "$0")"
umask 077
SECRETS=secrets
NODE="${NODE:-node}"
if ! "$NODE" -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 24 ? 0 : 1)' 2>/dev/null; then
  NODE=../node_modules/.bin/node   # the pinned Node 24 of `npm ci`
fi

CERTS="$SECRETS/certs"
if [ ! -f "$CERTS/control-plane/ca.pem" ]; then
  # An earlier layout kept every file in certs/ itself: split it rather than reissue.
  if [ ! -f "$CERTS/ca.pem" ]; then
    sh scripts/make-certs.sh "$CERTS" egress
  fi
  mkdir -p "$CERTS/control-plane" "$CERTS/egress"
  cp "$CERTS/ca.pem" "$CERTS/control-plane/ca.pem"
  cp "$CERTS/ca.pem" "$CERTS/egress/ca.pem"
  mv "$CERTS/control-plane.pem" "$CERTS/control-plane-key.pem" "$CERTS/control-plane/"
  mv "$CERTS/egress.pem" "$CERTS/egress-key.pem" "$CERTS/egress/"
  rm -f "$CERTS/ca.pem"
fi
"$NODE" make-keys.ts "$SECRETS/keys"

# The containers run as uid 65532: they read the mounted files through their group.
if [ "$(id -u)" = 0 ]; then
  chgrp -R 65532 "$SECRETS" && chmod -R g+rX "$SECRETS"
fi

touch .env
set_default() { grep -q "^$1=" .env || printf '%s=%s\n' "$1" "$2" >>.env; }
set_default POSTGRES_PASSWORD "$(openssl rand -hex 24)"
# The proxies' own role: read by the database's first start (postgres-init/) and by the proxies only.
set_default LATCH_EGRESS_PASSWORD "$(openssl rand -hex 24)"
# The control plane's own role (postgres-init/): it owns the latch database and is no superuser.
set_default LATCH_CONTROL_PASSWORD "$(openssl rand -hex 24)"
set_default BASE_URL "http://localhost:8787"
set_default SMTP_URL ""
# The public half of the ticket key: always the current file's (a rotation rewrites it).
TICKET_KEYS="$(tr -d '\n' <"$SECRETS/keys/control-plane/ticket-public-keys.txt")"
grep -v '^EGRESS_TICKET_PUBLIC_KEYS=' .env >.env.tmp || true
printf 'EGRESS_TICKET_PUBLIC_KEYS=%s\n' "$TICKET_KEYS" >>.env.tmp
mv .env.tmp .env
echo "deploy/.env and deploy/$SECRETS are ready."

if grep -q '^SMTP_URL=$' .env; then
  echo "Set SMTP_URL in deploy/.env (sign-in codes are mailed), then: docker compose -f deploy/compose.yaml up -d" >&2
  exit 0
fi
if [ "${1:-}" != "--no-up" ]; then
  docker compose up -d --build
  echo "Latch: ${BASE_URL:-http://localhost:8787} (docker compose ps, docker compose logs -f)"
fi
