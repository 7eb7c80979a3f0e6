#!/usr/bin/env bash
# Offline checks of the deploy artifacts: the Kubernetes manifests
# (deploy/k8s), the systemd units (deploy/systemd) and deploy/Dockerfile.
# No cluster, no Docker daemon, no network. Exits 1 naming every failed
# check. Needs the Debian packages yamllint, python3-yaml,
# python3-kubernetes and systemd.
#
#   deploy/check_deploy.sh [BUILD_DIR]   # BUILD_DIR defaults to ./build
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
python=/usr/bin/python3  # Debian's, where python3-yaml and python3-kubernetes live
failed=()
fail() { echo "check_deploy: FAIL: $*" >&2; failed+=("$*"); }
step() { echo "== $*"; }

missing=()
command -v yamllint >/dev/null || missing+=(yamllint)
command -v systemd-analyze >/dev/null || missing+=(systemd)
"$python" -c 'import yaml' 2>/dev/null || missing+=(python3-yaml)
"$python" -c 'import kubernetes.client' 2>/dev/null || missing+=(python3-kubernetes)
if [ ${#missing[@]} -gt 0 ]; then
  echo "check_deploy: missing tools; apt-get install -y ${missing[*]}" >&2
  exit 1
fi

step "yamllint (relaxed; errors fail: syntax, duplicate keys, tabs)"
yamllint_config='{extends: relaxed, rules: {line-length: {max: 120}}}'
yamllint -f parsable -d "$yamllint_config" deploy/k8s deploy/systemd/*.yaml || fail yamllint

step "check_manifests.py (Kubernetes API models, references, daemon settings)"
"$python" deploy/k8s/check_manifests.py --build "$build" \
  --daemon-config dispatcher=deploy/systemd/dispatcher.yaml \
  --daemon-config worker=deploy/systemd/worker.yaml || fail check_manifests

step "kubectl kustomize (only where kubectl is installed)"
if command -v kubectl >/dev/null; then
  if rendered=$(kubectl kustomize deploy/k8s); then
    echo "rendered $(grep -c '^kind:' <<<"$rendered") objects"
  else
    fail "kubectl kustomize deploy/k8s"
  fi
else
  echo "skipped: no kubectl"
fi

step "systemd-analyze verify and security on the units"
# verify needs ExecStart's binary: a copy of each unit runs the build's
# daemon (or /bin/true without a build). Everything else is verified as written.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for unit in deploy/systemd/*.service; do
  name=$(basename "$unit" .service)
  daemon=$(sed -n 's#^ExecStart=/opt/sluice/bin/\([a-z]*\) .*#\1#p' "$unit")
  if [ -z "$daemon" ]; then fail "$unit: ExecStart is not /opt/sluice/bin/DAEMON ..."; continue; fi
  binary=$(realpath "$build/${daemon%d}/$daemon" 2>/dev/null)
  [ -x "$binary" ] || binary=/bin/true
  sed "s#^ExecStart=/opt/sluice/bin/$daemon #ExecStart=$binary #" "$unit" > "$tmp/$name.service"
  # verify exits 0 on settings it ignores ("Failed to parse ..."): any output fails.
  out=$(systemd-analyze verify --man=no "$tmp/$name.service" 2>&1) && [ -z "$out" ] ||
    fail "$unit: systemd-analyze verify: $out"
  # 0 (locked down) to 100; the units score about 17.
  systemd-analyze security --offline=yes --threshold=30 "$tmp/$name.service" >/dev/null ||
    fail "$unit: systemd-analyze security: exposure above 3.0"
  # The config's credential paths are the unit's LoadCredential= names.
  config=deploy/systemd/${daemon%d}.yaml
  for cred in $(grep -o "/run/credentials/[^/]*/[^ ]*" "$config"); do
    cred_unit=$(echo "$cred" | cut -d/ -f4); cred_name=$(echo "$cred" | cut -d/ -f5)
    [ "$cred_unit" = "$name.service" ] && grep -q "^LoadCredential=$cred_name:" "$unit" ||
      fail "$config: $cred is not a LoadCredential= of $name.service"
  done
  for root in $("$python" -c 'import sys, yaml; print(*yaml.safe_load(open(sys.argv[1])).get("data_roots", []))' "$config"); do
    grep -q "^ReadOnlyPaths=-\?$root\$" "$unit" || fail "$unit: data root $root is not in ReadOnlyPaths="
  done
  work_dir=$("$python" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1])).get("work_dir", ""))' "$config")
  if [ -n "$work_dir" ] && ! grep -q "^StateDirectory=${work_dir#/var/lib/}\$" "$unit"; then
    fail "$unit: work_dir $work_dir is not its StateDirectory= (it would not be writable or kept)"
  fi
done
echo "verified $(ls deploy/systemd/*.service | wc -l) units (ExecStart: the build's daemons, or /bin/true)"

step "Dockerfile lint"
"$python" - "$build" <<'PY' || fail Dockerfile
import os, re, subprocess, sys
build = sys.argv[1]
text = open("deploy/Dockerfile").read().replace("\\\n", " ")
lines = [l.strip() for l in text.splitlines() if l.strip() and not l.strip().startswith("#")]
errors = []
stages, user, final_packages = [], None, []
for line in lines:
    word, _, rest = line.partition(" ")
    word = word.upper()
    if word == "FROM":
        m = re.match(r"(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$", rest, re.I)
        image = m.group(1) if m else rest
        if not re.match(r"^debian:(12|bookworm)(-slim)?(@sha256:[0-9a-f]{64})?$", image):
            errors.append(f"FROM {image}: use debian:12 (bookworm), pinned, not latest")
        stages.append(m.group(2) if m else None)
        user, final_packages = None, []
    elif word == "ADD" and re.search(r"https?://", rest):
        errors.append(f"ADD of a URL ({rest}): download nothing at build time; COPY from the context")
    elif word == "USER":
        user = rest
    elif word == "COPY" and "--from=" in rest:
        src = re.search(r"--from=(\S+)", rest).group(1)
        if src not in stages[:-1]:
            errors.append(f"COPY --from={src}: no earlier stage of that name")
    elif word == "RUN" and "apt-get install" in rest:
        if "--no-install-recommends" not in rest or "rm -rf /var/lib/apt/lists" not in rest:
            errors.append("apt-get install needs --no-install-recommends and rm -rf /var/lib/apt/lists/* in its RUN")
        if "sudo" in rest.split():
            errors.append("sudo in a RUN")
        install = rest.split("apt-get install", 1)[1].split("&&")[0].split()
        final_packages = [p for p in install if not p.startswith("-")]
if len(stages) < 2:
    errors.append("not multi-stage: the runtime image must not hold the compilers")
if user is None or not re.match(r"^[1-9][0-9]*(:[0-9]+)?$", user):
    errors.append(f"final stage USER {user!r}: must be a numeric non-root uid (runAsNonRoot checks it)")
# The runtime packages must be real Debian 12 packages ...
for pkg in final_packages:
    known = subprocess.run(["dpkg-query", "-W", pkg], capture_output=True).returncode == 0 or \
        subprocess.run(["apt-cache", "show", pkg], capture_output=True).returncode == 0
    if not known:
        errors.append(f"runtime package {pkg}: not a Debian package here (dpkg-query, apt-cache)")
# ... and cover every library the built daemons and CLI load.
base = {"libc6", "libgcc-s1"}
binaries = [os.path.join(build, p) for p in ("dispatcher/dispatcherd", "worker/workerd", "cli/sluice")]
# tokenize's bridge, which the binaries load at run time (dlopen), not by ldd.
bridge = os.path.join(build, "pipeline/libsluice_sentencepiece.so")
if all(os.access(b, os.X_OK) for b in binaries):
    if os.path.exists(bridge):
        binaries.append(bridge)
    libs = set()
    for b in binaries:
        out = subprocess.run(["ldd", b], capture_output=True, text=True).stdout
        libs |= {m.group(1) for m in re.finditer(r"=> (/\S+)", out)}
    # One dpkg -S for all (it is slow to start); by name and by real path, as
    # /lib is a link to /usr/lib on Debian 12.
    paths = sorted(libs | {os.path.realpath(l) for l in libs})
    out = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True).stdout
    owners = {}
    for line in out.splitlines():
        pkg, _, path = line.partition(": ")
        owners[path] = pkg.split(":")[0]
    # apt installs what the listed packages depend on (libcurl4's TLS and
    # Kerberos libraries, say): their closure, from the installed packages'
    # Depends and Pre-Depends, counts as installed.
    installed = set(final_packages)
    frontier = list(final_packages)
    while frontier:
        pkg = frontier.pop()
        out = subprocess.run(["dpkg-query", "-W", "-f=${Depends}, ${Pre-Depends}", pkg],
                             capture_output=True, text=True).stdout
        for alternative in out.split(","):
            for dep in alternative.split("|")[:1]:
                name = dep.strip().split(" ")[0].split(":")[0]
                if name and name not in installed:
                    installed.add(name)
                    frontier.append(name)
    for lib in sorted(libs):
        pkg = owners.get(lib) or owners.get(os.path.realpath(lib))
        if pkg is None:
            continue  # Sluice's own libraries (copied from the build stage), CUDA (off in the image)
        if pkg not in installed and pkg not in base:
            errors.append(f"{lib} (package {pkg}) is loaded by the daemons but not installed in the runtime stage")
    print(f"runtime packages cover the {len(libs)} libraries {build}'s binaries load")
else:
    print(f"no build at {build}: runtime packages not compared with ldd")
for e in errors:
    print(f"Dockerfile: {e}", file=sys.stderr)
sys.exit(1 if errors else 0)
PY

if [ ${#failed[@]} -gt 0 ]; then
  echo "check_deploy: FAILED: ${#failed[@]} check(s), the FAIL lines above" >&2
  exit 1
fi
echo "check_deploy: all checks passed"
