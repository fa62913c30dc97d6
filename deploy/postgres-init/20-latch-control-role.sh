#!/bin/sh
# Runs once, on the database's first start (the postgres image's /docker-entrypoint-initdb.d):
# makes the control plane's own role, which owns the latch database and nothing more. POSTGRES_USER
# is the image's superuser and stays for the operator's own maintenance; the control plane refuses
# to start as a superuser in production (it could run programs on this server and turn the audit
# ledger's guards off). An installation made before this script: run it once by hand,
#   docker compose exec postgres sh /docker-entrypoint-initdb.d/20-latch-control-role.sh
# which also hands the tables the control plane made as POSTGRES_USER to the new role.
set -eu
: "${LATCH_CONTROL_PASSWORD:?the control plane's database password (deploy/.env, written by bootstrap.sh)}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  --set=password="$LATCH_CONTROL_PASSWORD" --set=db="$POSTGRES_DB" <<'SQL'
SELECT NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'latch_control') AS is_new \gset
\if :is_new
  CREATE ROLE latch_control LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'password';
\endif
ALTER DATABASE :"db" OWNER TO latch_control;
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT format('ALTER TABLE %I.%I OWNER TO latch_control', schemaname, tablename) AS ddl
             FROM pg_tables WHERE schemaname = 'public' AND tableowner <> 'latch_control'
  LOOP EXECUTE r.ddl; END LOOP;
  FOR r IN SELECT format('ALTER SEQUENCE %I.%I OWNER TO latch_control', schemaname, sequencename) AS ddl
             FROM pg_sequences WHERE schemaname = 'public' AND sequenceowner <> 'latch_control'
  LOOP EXECUTE r.ddl; END LOOP;
  FOR r IN SELECT format('ALTER FUNCTION %s OWNER TO latch_control', p.oid::regprocedure) AS ddl
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'public' AND pg_get_userbyid(p.proowner) <> 'latch_control'
  LOOP EXECUTE r.ddl; END LOOP;
END $$;
SQL
