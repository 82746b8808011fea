#!/usr/bin/env bash
# The main job on the embedded defaults: no cloud account, no API key. Writes post.md.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export BLOGWRITER_HOME=${BLOGWRITER_HOME:-$PWD/.blogwriter}
.venv/bin/blogwriter write "How BlogWriter turns a topic into a cited blog post" \
  --min-words 600 --max-words 900 --source examples/sources --out post.md
cat post.md
