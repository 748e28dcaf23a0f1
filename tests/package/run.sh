#!/usr/bin/env bash
# Packages the already-built debug `interpreter` with scripts/package (the code path
# scripts/release uses) and installs it the ways users do, without Rust:
# - the checksum files verify with `sha256sum -c`, and catch a corrupted artifact;
# - the tarball holds exactly the layout the cargo-binstall metadata in crates/cli/Cargo.toml
#   describes, and the binary in it runs;
# - the wheel installs with `pip install --no-index` into a clean venv, puts `interpreter`
#   in the venv's bin (byte-identical to the binary packaged), `--version` names the
#   commit, a real command runs from there, and `pip uninstall` removes it again.
# Uses INTERPRETER_BIN when set, else builds (or reuses) target/debug/interpreter. The
# first run installs the pinned `wheel` tool into a cached private venv (see
# scripts/package); everything else lives in a temporary directory removed on exit.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

if [[ -z "${INTERPRETER_BIN:-}" ]]; then
  (cd "$repo" && cargo build --quiet --locked -p interpreter-cli --bin interpreter)
  INTERPRETER_BIN="${CARGO_TARGET_DIR:-$repo/target}/debug/interpreter"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

fail() { echo "tests/package: FAIL: $*" >&2; exit 1; }
ok() { echo "tests/package: ok: $*" >&2; }

target="$(rustc -vV | sed -n 's/^host: //p')"
"$repo/scripts/package" --target "$target" --out "$tmp/dist" "$INTERPRETER_BIN"

# One line each: the binstall templates contain spaces.
{ read -r version; read -r pkg_url; read -r bin_dir; read -r pkg_fmt; } < <(
  cd "$repo" && cargo metadata --no-deps --format-version 1 --locked |
    python3 -c 'import json, sys
cli = next(p for p in json.load(sys.stdin)["packages"] if p["name"] == "interpreter-cli")
b = cli["metadata"]["binstall"]
print(cli["version"], b["pkg-url"], b["bin-dir"], b["pkg-fmt"], sep="\n")')
name="interpreter-$version-$target"
tarball="$name.tar.gz"
wheel="$(cd "$tmp/dist" && ls -- interpreter-"$version"-py3-none-*.whl)"

# --- artifacts and checksums -------------------------------------------------------------
expected="$(printf '%s\n' SHA256SUMS "$tarball" "$tarball.sha256" "$wheel" "$wheel.sha256" | sort)"
actual="$(cd "$tmp/dist" && ls | sort)"
[[ "$actual" == "$expected" ]] || fail "dist holds
$actual
expected
$expected"
(cd "$tmp/dist" && sha256sum --quiet -c SHA256SUMS && sha256sum --quiet -c "$tarball.sha256" "$wheel.sha256") ||
  fail "checksums do not verify"
[[ "$(wc -l <"$tmp/dist/SHA256SUMS")" -eq 2 ]] || fail "SHA256SUMS should list the tarball and the wheel"
mkdir "$tmp/corrupt"
cp "$tmp/dist/$tarball" "$tmp/dist/$tarball.sha256" "$tmp/corrupt/"
printf 'x' | dd of="$tmp/corrupt/$tarball" bs=1 seek=100 conv=notrunc status=none
if (cd "$tmp/corrupt" && sha256sum --quiet -c "$tarball.sha256" >/dev/null 2>&1); then
  fail "sha256sum -c accepted a corrupted tarball"
fi
ok "artifacts, SHA256SUMS and .sha256 files verify; a corrupted tarball is caught"

# --- tarball: the cargo-binstall layout ----------------------------------------------------
# Expand the binstall templates the way cargo-binstall does for this target.
expand() {
  local s="$1"
  s="${s//\{ version \}/$version}"
  s="${s//\{ target \}/$target}"
  s="${s//\{ bin \}/interpreter}"
  s="${s//\{ binary-ext \}/}"
  printf '%s' "$s"
}
[[ "$pkg_fmt" == "tgz" ]] || fail "binstall pkg-fmt is $pkg_fmt, the tarball is tgz"
[[ "$(basename "$(expand "$pkg_url")")" == "$tarball" ]] ||
  fail "binstall pkg-url $pkg_url does not name $tarball"
[[ "$pkg_url" == "{ repo }/"* ]] || fail "binstall pkg-url does not start at { repo }"
listing="$(tar -tzf "$tmp/dist/$tarball" | sort)"
expected="$(printf '%s\n' "$name/" "$name/LICENSE" "$name/README.md" "$name/interpreter" | sort)"
[[ "$listing" == "$expected" ]] || fail "tarball holds
$listing"
mkdir "$tmp/untar"
tar -xzf "$tmp/dist/$tarball" -C "$tmp/untar"
binstalled="$tmp/untar/$(expand "$bin_dir")"
[[ -x "$binstalled" ]] || fail "binstall bin-dir $(expand "$bin_dir") is not an executable in the tarball"
cmp -s "$binstalled" "$INTERPRETER_BIN" || fail "the tarball's binary differs from $INTERPRETER_BIN"
ok "tarball $tarball matches the binstall pkg-url and bin-dir"

# --- wheel: install into a clean venv, run from its bin ------------------------------------
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/pip" install --quiet --no-index --disable-pip-version-check "$tmp/dist/$wheel"
installed="$tmp/venv/bin/interpreter"
[[ -x "$installed" ]] || fail "pip install did not put interpreter in $tmp/venv/bin"
cmp -s "$installed" "$INTERPRETER_BIN" || fail "the installed binary differs from the packaged one"

# An empty environment: the installed binary needs nothing from the shell that built it.
run() { env -i HOME="$tmp/home" PATH="$tmp/venv/bin:/usr/bin:/bin" "$@"; }
mkdir "$tmp/home"
version_line="$(run interpreter --version)"
[[ "$version_line" == "$("$INTERPRETER_BIN" --version)" ]] || fail "installed --version: $version_line"
[[ "$version_line" == "interpreter $version"* ]] || fail "--version does not name $version: $version_line"
if git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
  [[ "$version_line" =~ \([0-9a-f]{12}(-dirty)?\)$ ]] || fail "--version does not name the commit: $version_line"
fi
ok "$tmp/venv/bin/interpreter --version: $version_line"

completion="$(run interpreter completion bash)"
grep -q '^_interpreter()' <<<"$completion" || fail "completion bash printed no _interpreter function"
grep -q 'complete -F _interpreter' <<<"$completion" || fail "completion bash does not register itself"
ok "interpreter completion bash runs from the venv"

"$tmp/venv/bin/pip" uninstall --quiet --yes interpreter
[[ ! -e "$installed" ]] || fail "pip uninstall left $installed behind"
ok "pip uninstall removes it"
