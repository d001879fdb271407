#!/usr/bin/env bash
# Debian packages the test suite needs: Chromium (browser tests), gettext (compiled
# translations), docker-compose (validates docker-compose.yml), CJK fonts (screenshots),
# redis-server (the fault suite stops a private one mid-test).
set -euo pipefail
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v msgfmt >/dev/null || missing+=(gettext)
command -v docker-compose >/dev/null || missing+=(docker-compose)
[ -d /usr/share/fonts/opentype/noto ] || missing+=(fonts-noto-cjk)
command -v redis-server >/dev/null || missing+=(redis-server)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "missing Debian packages: ${missing[*]}; install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
