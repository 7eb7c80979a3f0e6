#!/usr/bin/env bash
# Installs Sluice's build and test dependencies from Debian 12 packages.
# Idempotent: packages that are already installed are skipped, and apt-get
# is not called at all when nothing is missing.
#
#   deploy/install_deps.sh [--bench] [--no-test-servers]
#
# --bench also installs what only the benchmarks need (matplotlib, for
# bench/soak.sh's plot; s3fs), which CI does not. --no-test-servers leaves
# out the tests' S3 server from npm (an image's build stage needs none).
set -euo pipefail

bench=false
test_servers=true
for arg in "$@"; do
  case "$arg" in
    --bench) bench=true ;;
    --no-test-servers) test_servers=false ;;
    *) echo "install_deps: unknown argument '$arg' (usage: install_deps.sh [--bench] [--no-test-servers])" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libspdlog-dev libfmt-dev libcli11-dev libyaml-cpp-dev
  catch2 zlib1g-dev libssl-dev libdlpack-dev libsnappy-dev libzstd-dev iperf3
  libjpeg62-turbo-dev libpng-dev libhwy-dev
  # Text for language models: json_lines, tokenize; spm_train makes the
  # tests' and the demo's tokenizer model, python3-sentencepiece is the
  # text benchmark's Python baseline.
  libsimdjson-dev libsentencepiece-dev sentencepiece python3-sentencepiece
  # Python callables shipped to workers (python.allow_client_functions).
  python3-cloudpickle
  python3-dev pybind11-dev python3-numpy python3-pytest python3-pytest-timeout python3-torch python3-torchvision python3-pil
  # mypy's stubtest checks python/sluice/_sluice.pyi against the built module.
  mypy
  # Operations tests: TLS certificates, a Prometheus server and promtool,
  # headless Chromium for the status page, a gRPC client for health checks,
  # and the deploy manifests' validators.
  libcpp-httplib-dev openssl prometheus chromium python3-grpcio
  yamllint python3-yaml python3-kubernetes systemd
  # CPack's .deb packages (cmake/SluicePackage.cmake): dpkg-shlibdeps
  # (dpkg-dev) for their Depends, file to find their binaries; pip and
  # venv install the Python package in the pip_install test.
  dpkg-dev file python3-pip python3-venv python3-setuptools python3-wheel
  # Object storage (pipeline/io): libcurl for HTTP(S) and SigV4'd S3
  # requests, pugixml for S3's XML listings; nginx serves the HTTPS tests'
  # folder; npm (below) installs their S3 server.
  libcurl4-openssl-dev libpugixml-dev nginx-light
  # The fuzz targets (tests/fuzz/): clang, its sanitizer and libFuzzer
  # runtimes (libclang_rt.fuzzer), and lld.
  clang-14 libclang-rt-14-dev lld-14
)
if $bench; then
  # bench/soak.sh plots its samples; bench/object_storage.py compares with
  # a bucket mounted by s3fs (FUSE).
  packages+=(python3-matplotlib s3fs)
fi

missing=()
for pkg in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "install_deps: all ${#packages[@]} packages already installed"
else
  echo "install_deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The object-storage tests' S3 server: Debian packages none, so s3rver 3
# comes from npm into its own prefix (tests/python/object_storage_servers.py
# finds it there, or at $SLUICE_S3RVER).
s3rver_prefix=/opt/sluice-npm
if $test_servers && [ ! -x "$s3rver_prefix/node_modules/.bin/s3rver" ]; then
  if ! command -v npm >/dev/null; then
    # Debian's npm, unless a Node.js that ships its own is installed.
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends npm
  fi
  echo "install_deps: installing s3rver@3 (npm) into $s3rver_prefix"
  "${sudo_cmd[@]}" mkdir -p "$s3rver_prefix"
  "${sudo_cmd[@]}" npm install --prefix "$s3rver_prefix" --no-audit --no-fund --loglevel=error s3rver@3
fi
