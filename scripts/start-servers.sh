#!/usr/bin/env bash
# Starts the object-storage servers the store tests run against, all on
# 127.0.0.1: versitygw (S3, :7070), SeaweedFS (S3, :8333), fake-gcs-server
# (:4443), Azurite blob (:10000) and toxiproxy (:8474). Waits until each
# answers, creates the test bucket in each, and prints the environment the
# tests read as export lines (also written to $STATE/env):
#
#   eval "$(scripts/start-servers.sh)" && go test ./internal/store/...
#
# Servers from a previous run are stopped first. Tools come from
# scripts/install-test-deps.sh. Stop them with scripts/stop-servers.sh.
set -euo pipefail
export GOTOOLCHAIN=go1.26.10 # go.mod's go line: a machine's own go may be older (README: Toolchain)

HERE=$(cd "$(dirname "$0")" && pwd)
TOOLS=${HOMESNAP_TOOLS:-$HOME/.cache/homesnap-tools}
BIN=$TOOLS/bin
STATE=${HOMESNAP_TEST_STATE:-${TMPDIR:-/tmp}/homesnap-test-servers}
TIMEOUT=${HOMESNAP_TEST_START_TIMEOUT:-60} # seconds per server
BUCKET=homesnap-test
ACCESS=test SECRET=testtest
# Azurite's fixed development account (public, documented by Microsoft).
AZ_ACCOUNT=devstoreaccount1
AZ_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

log() { printf '== %s\n' "$*" >&2; } # stdout carries only the export lines
die() { printf 'start-servers: %s\n' "$*" >&2; exit 1; }

for tool in versitygw weed fake-gcs-server azurite-blob toxiproxy-server; do
  [ -x "$BIN/$tool" ] || die "$BIN/$tool is missing: run scripts/install-test-deps.sh first"
done

"$HERE/stop-servers.sh" >&2
mkdir -p "$STATE/logs"
DATA=$(mktemp -d "$STATE/data.XXXXXX")
echo "$DATA" >"$STATE/datadir"
cd "$DATA" # some servers drop files in their working directory

# start NAME CMD... runs a server in its own session, detached from this
# shell, and records its PID.
start() {
  local name=$1
  shift
  setsid "$@" </dev/null >"$STATE/logs/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}

# ready NAME URL [CODE] waits until URL answers (with CODE if given).
ready() {
  local name=$1 url=$2 want=${3:-} pid code
  pid=$(cat "$STATE/$name.pid")
  for ((i = 0; i < TIMEOUT * 5; i++)); do
    code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" || true)
    if [ "$code" != 000 ] && { [ -z "$want" ] || [ "$code" = "$want" ]; }; then
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      tail -20 "$STATE/logs/$name.log" >&2
      die "$name exited while starting (log: $STATE/logs/$name.log)"
    fi
    sleep 0.2
  done
  tail -20 "$STATE/logs/$name.log" >&2
  die "$name did not answer on $url within ${TIMEOUT}s (last status $code; log: $STATE/logs/$name.log)"
}

t0=$SECONDS
mkdir -p "$DATA/versitygw" "$DATA/seaweed"
cat >"$DATA/seaweed-s3.json" <<EOF
{"identities":[{"name":"admin","credentials":[{"accessKey":"$ACCESS","secretKey":"$SECRET"}],"actions":["Admin","Read","List","Tagging","Write"]}]}
EOF
start versitygw "$BIN/versitygw" --port 127.0.0.1:7070 --access "$ACCESS" --secret "$SECRET" --quiet posix "$DATA/versitygw"
start seaweed "$BIN/weed" mini -dir="$DATA/seaweed" -ip=127.0.0.1 -ip.bind=127.0.0.1 -s3.port=8333 \
  -s3.config="$DATA/seaweed-s3.json" -webdav=false -admin.ui=false -master.telemetry=false \
  -s3.port.iceberg=0 -s3.port.lance=0
start fake-gcs "$BIN/fake-gcs-server" -scheme http -host 127.0.0.1 -port 4443 -backend memory \
  -public-host 127.0.0.1:4443 -log-level warn
start azurite "$BIN/azurite-blob" --blobHost 127.0.0.1 --blobPort 10000 --inMemoryPersistence \
  --disableTelemetry --skipApiVersionCheck --loose
start toxiproxy "$BIN/toxiproxy-server" -host 127.0.0.1 -port 8474

ready versitygw http://127.0.0.1:7070/
ready seaweed http://127.0.0.1:8333/status 200
ready fake-gcs http://127.0.0.1:4443/_internal/healthcheck 200
ready azurite "http://127.0.0.1:10000/$AZ_ACCOUNT?comp=list"
ready toxiproxy http://127.0.0.1:8474/version 200
log "servers ready after $((SECONDS - t0))s"

# s3bucket NAME URL creates a bucket with a SigV4-signed PUT; the filer
# behind SeaweedFS's S3 port may need a moment after /status answers.
s3bucket() {
  local code
  for ((i = 0; i < 50; i++)); do
    code=$(curl -s -o "$STATE/logs/mkbucket.out" -w '%{http_code}' -X PUT \
      --aws-sigv4 aws:amz:us-east-1:s3 -u "$ACCESS:$SECRET" "$2/$BUCKET" \
      -H "x-amz-content-sha256: $(printf "" | sha256sum | cut -d" " -f1)" || true)
    case $code in 200 | 409) return 0 ;; esac
    sleep 0.2
  done
  die "$1: creating bucket $BUCKET failed with status $code: $(cat "$STATE/logs/mkbucket.out")"
}

# azcontainer creates the container with Azure's SharedKey authorization.
azcontainer() {
  local date version=2021-08-06 hexkey sig code
  date=$(LC_ALL=C TZ=GMT date '+%a, %d %b %Y %H:%M:%S GMT')
  hexkey=$(printf %s "$AZ_KEY" | base64 -d | od -An -v -tx1 | tr -d ' \n')
  sig=$(printf 'PUT\n\n\n\n\n\n\n\n\n\n\n\nx-ms-date:%s\nx-ms-version:%s\n/%s/%s/%s\nrestype:container' \
    "$date" "$version" "$AZ_ACCOUNT" "$AZ_ACCOUNT" "$BUCKET" |
    openssl dgst -sha256 -mac HMAC -macopt "hexkey:$hexkey" -binary | base64 -w0)
  code=$(curl -s -o "$STATE/logs/mkbucket.out" -w '%{http_code}' -X PUT -H "Content-Length: 0" \
    -H "x-ms-date: $date" -H "x-ms-version: $version" -H "Authorization: SharedKey $AZ_ACCOUNT:$sig" \
    "http://127.0.0.1:10000/$AZ_ACCOUNT/$BUCKET?restype=container")
  case $code in 201 | 409) ;; *) die "azurite: creating container $BUCKET failed with status $code: $(cat "$STATE/logs/mkbucket.out")" ;; esac
}

s3bucket versitygw http://127.0.0.1:7070
s3bucket seaweed http://127.0.0.1:8333
code=$(curl -s -o "$STATE/logs/mkbucket.out" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
  -d "{\"name\":\"$BUCKET\"}" http://127.0.0.1:4443/storage/v1/b)
case $code in 200 | 409) ;; *) die "fake-gcs: creating bucket $BUCKET failed with status $code: $(cat "$STATE/logs/mkbucket.out")" ;; esac
azcontainer
log "buckets created; all ready after $((SECONDS - t0))s"

cat >"$STATE/env" <<EOF
export HOMESNAP_TEST_SERVERS=1
export HOMESNAP_TEST_BUCKET=$BUCKET
export HOMESNAP_TEST_S3_ENDPOINT=http://127.0.0.1:7070
export HOMESNAP_TEST_SEAWEED_ENDPOINT=http://127.0.0.1:8333
export HOMESNAP_TEST_S3_ACCESS_KEY=$ACCESS
export HOMESNAP_TEST_S3_SECRET_KEY=$SECRET
export STORAGE_EMULATOR_HOST=127.0.0.1:4443
export HOMESNAP_TEST_AZURE_CONNECTION_STRING='DefaultEndpointsProtocol=http;AccountName=$AZ_ACCOUNT;AccountKey=$AZ_KEY;BlobEndpoint=http://127.0.0.1:10000/$AZ_ACCOUNT;'
export HOMESNAP_TEST_TOXIPROXY=http://127.0.0.1:8474
EOF
cat "$STATE/env"
