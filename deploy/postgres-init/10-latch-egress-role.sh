#!/bin/sh
# Runs once, on the database's first start (the postgres image's /docker-entrypoint-initdb.d):
# makes the proxies' own role. It gets SELECT, INSERT and DELETE on egress_spent_tickets from the
# control plane's migration, and nothing else (DECISIONS "Faults and isolation in deployments").
set -eu
: "${LATCH_EGRESS_PASSWORD:?the proxies' database password (deploy/.env, written by bootstrap.sh)}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  --set=password="$LATCH_EGRESS_PASSWORD" <<'SQL'
CREATE ROLE latch_egress LOGIN PASSWORD :'password';
-- Only the application's database: not the maintenance ones.
REVOKE CONNECT ON DATABASE postgres FROM PUBLIC;
SQL
