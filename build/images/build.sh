#!/usr/bin/env bash
# build/images/build.sh: builds Platform's container images without pulling anything (see
# build/images/README.md). `make images` runs it.
#
#   platform/<name>:$VERSION and :latest for the services (storage authn authz admission
#   certificates controllers gateway) and the all-in-one (platform): static Go binaries built on
#   this host (CGO_ENABLED=0), each FROM scratch with the host's CA bundle and user 65532:65532.
#
#   $REDIS_IMAGE and $JAEGER_IMAGE, the upstream names compose.yaml uses, only when no image of
#   that name exists (an online machine may have pulled the real one; FORCE_THIRD_PARTY=1 rebuilds
#   them): Redis from Debian's packages, Jaeger v2 compiled from its Go module source outside the
#   repository.
#
# Environment: VERSION (default: git describe --tags --always --dirty), GO (default go), IMAGES
# (the subset to build, default all), IMAGES_DIR (build contexts, default bin/images).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
GO=${GO:-go}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
SERVICES="storage authn authz admission certificates controllers gateway platform"
IMAGES=${IMAGES:-"$SERVICES redis jaeger"}
out=${IMAGES_DIR:-$root/bin/images}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
# The upstream images compose.yaml names; keep them in step with compose.yaml.
REDIS_IMAGE=${REDIS_IMAGE:-redis:7}
JAEGER_IMAGE=${JAEGER_IMAGE:-jaegertracing/jaeger:2.13.0}
# Jaeger v2.13.0 is published as the Go module github.com/jaegertracing/jaeger v1.76.0 (each
# release carries a v1 and a v2 number; the module path has no /v2).
JAEGER_MODULE=github.com/jaegertracing/jaeger
JAEGER_MODULE_VERSION=${JAEGER_MODULE_VERSION:-v1.76.0}
JAEGER_RELEASE=${JAEGER_RELEASE:-v2.13.0}
# lite (default): build/images/jaeger/lite/main.go, Jaeger's all-in-one trimmed to what the compose
# stack uses (OTLP in, memory storage, query API); full: upstream's cmd/jaeger with every
# receiver, exporter and processor it ships.
JAEGER_BUILD=${JAEGER_BUILD:-lite}
# Debian's redis-tools holds redis-server (as redis-check-rdb, one binary with several names) and
# redis-cli; the other packages are the shared libraries they load, transitively. A library
# missing from this list is reported by name below.
REDIS_PACKAGES="redis-tools libc6 libatomic1 libjemalloc2 liblzf1 libssl3 libsystemd0 libstdc++6 libgcc-s1 libcap2 libgcrypt20 liblzma5 libzstd1 liblz4-1 libgpg-error0"

want() { [[ " $IMAGES " == *" $1 "* ]]; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }
die() { echo "images: $*" >&2; exit 1; }

command -v docker >/dev/null || die "docker is not installed"
docker info >/dev/null 2>&1 || die "the Docker engine does not answer (docker info failed)"
[[ -r $CA_BUNDLE ]] || die "no CA bundle at $CA_BUNDLE (Debian: apt-get install ca-certificates)"

# dbuild <image>... -- <dockerfile> <context>: a quiet docker build with the version labels.
dbuild() {
	local tags=()
	while [[ $1 != -- ]]; do tags+=(-t "$1"); shift; done
	shift
	docker build -q "${tags[@]}" --label "org.opencontainers.image.version=$VERSION" \
		--label "org.opencontainers.image.source=platform" -f "$1" "$2" >/dev/null 2> >(grep -v -e 'legacy builder is deprecated' -e 'buildx component' -e 'docs.docker.com/go/buildx' -e '^ *$' >&2)
}

start=$(now)
mkdir -p "$out"

# --- Platform's own images -------------------------------------------------------------------
svc=()
for n in $SERVICES; do want "$n" && svc+=("$n"); done
if ((${#svc[@]})); then
	t=$(now)
	pkgs=()
	for n in "${svc[@]}"; do
		if [[ $n == platform ]]; then pkgs+=(./services/allinone); else pkgs+=("./services/$n"); fi
	done
	mkdir -p "$out/bin"
	CGO_ENABLED=0 "$GO" build -trimpath -ldflags='-s -w' -o "$out/bin/" "${pkgs[@]}"
	if want platform; then mv -f "$out/bin/allinone" "$out/bin/platform"; fi
	echo "images: go build of ${svc[*]}: $(since "$t")"
	for n in "${svc[@]}"; do
		t=$(now)
		ctx=$out/ctx/$n
		rm -rf "$ctx" && mkdir -p "$ctx"
		ln -f "$out/bin/$n" "$ctx/$n" 2>/dev/null || cp "$out/bin/$n" "$ctx/$n"
		cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
		[[ $n == platform ]] && mkdir -p "$ctx/data"
		dbuild "platform/$n:$VERSION" "platform/$n:latest" -- "build/images/$n/Dockerfile" "$ctx"
		echo "images: platform/$n:$VERSION ($(docker image inspect -f '{{.Size}}' "platform/$n:$VERSION" | awk '{ printf "%.1f MB", $1 / 1e6 }')): $(since "$t")"
	done
fi

present() { [[ -z ${FORCE_THIRD_PARTY:-} ]] && docker image inspect "$1" >/dev/null 2>&1; }

# --- Redis from Debian's packages ------------------------------------------------------------
if want redis; then
	if present "$REDIS_IMAGE"; then
		echo "images: $REDIS_IMAGE exists, kept"
	else
		t=$(now)
		command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || die "building $REDIS_IMAGE needs apt-get and dpkg-deb (Debian)"
		ctx=$out/ctx/redis
		rm -rf "$ctx" && mkdir -p "$ctx/debs" "$ctx/stage" "$ctx/rootfs/usr/local/bin" "$ctx/data"
		# shellcheck disable=SC2086
		(cd "$ctx/debs" && apt-get download -q $REDIS_PACKAGES 2>&1 | grep -v -e 'unsandboxed' -e '^Get:' -e '^Fetched' || true)
		for deb in "$ctx"/debs/*.deb; do dpkg-deb -x "$deb" "$ctx/stage"; done
		[[ -x $ctx/stage/usr/bin/redis-check-rdb ]] || die "redis-tools did not provide /usr/bin/redis-check-rdb (the redis-server binary)"
		cp "$ctx/stage/usr/bin/redis-check-rdb" "$ctx/rootfs/usr/local/bin/redis-server"
		cp "$ctx/stage/usr/bin/redis-cli" "$ctx/rootfs/usr/local/bin/redis-cli"
		loader=$ctx/stage/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2
		libpath=$ctx/stage/lib/x86_64-linux-gnu:$ctx/stage/usr/lib/x86_64-linux-gnu
		# Copy exactly what the dynamic loader resolves, and only from the downloaded packages.
		for bin in redis-server redis-cli; do
			listing=$("$loader" --library-path "$libpath" --list "$ctx/rootfs/usr/local/bin/$bin") || die "cannot list the libraries of $bin"
			while read -r name arrow path _; do
				[[ $arrow == "=>" ]] || continue
				[[ $path == "$ctx/stage/"* ]] || die "$bin loads $name from '$path', not from the downloaded packages: add its Debian package to REDIS_PACKAGES in $0"
				if [[ $name == /* ]]; then dest=$ctx/rootfs$name; else dest=$ctx/rootfs${path#"$ctx/stage"}; fi
				mkdir -p "$(dirname "$dest")"
				cp -L "$path" "$dest"
			done <<<"$listing"
		done
		redis_version=$(dpkg-deb -f "$(ls "$ctx"/debs/redis-tools_*.deb)" Version)
		rm -rf "$ctx/debs" "$ctx/stage"
		dbuild "$REDIS_IMAGE" -- build/images/redis/Dockerfile "$ctx"
		docker run --rm --network none "$REDIS_IMAGE" redis-server --version >/dev/null || die "the built $REDIS_IMAGE does not run redis-server"
		echo "images: $REDIS_IMAGE from Debian's redis-tools $redis_version ($(docker image inspect -f '{{.Size}}' "$REDIS_IMAGE" | awk '{ printf "%.1f MB", $1 / 1e6 }')): $(since "$t")"
	fi
fi

# --- Jaeger v2 from its Go module source -----------------------------------------------------
if want jaeger; then
	if present "$JAEGER_IMAGE"; then
		echo "images: $JAEGER_IMAGE exists, kept"
	else
		t=$(now)
		ctx=$out/ctx/jaeger
		rm -rf "$ctx" && mkdir -p "$ctx/tmp"
		src=$(mktemp -d)
		trap 'chmod -R u+w "$src" 2>/dev/null; rm -rf "$src"' EXIT
		# Outside the repository and its go.work: the module is its own main module there, with
		# its own go.mod and go.sum (and replace directives, which is why `go install m@v` fails).
		dir=$(cd "$src" && GOWORK=off GOFLAGS= "$GO" mod download -json "$JAEGER_MODULE@$JAEGER_MODULE_VERSION" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
		[[ -d $dir ]] || die "go mod download $JAEGER_MODULE@$JAEGER_MODULE_VERSION gave no source directory"
		cp -r "$dir" "$src/jaeger" && chmod -R u+w "$src/jaeger"
		case $JAEGER_BUILD in
		full) jaeger_pkg=./cmd/jaeger ;;
		lite)
			# Under cmd/jaeger, so that it may import cmd/jaeger/internal's components.
			mkdir -p "$src/jaeger/cmd/jaeger/platformlite"
			cp build/images/jaeger/lite/main.go "$src/jaeger/cmd/jaeger/platformlite/main.go"
			jaeger_pkg=./cmd/jaeger/platformlite
			;;
		*) die "JAEGER_BUILD=$JAEGER_BUILD: lite or full" ;;
		esac
		(cd "$src/jaeger" && GOWORK=off GOFLAGS= GOTOOLCHAIN=local CGO_ENABLED=0 "$GO" build -trimpath \
			-ldflags "-s -w -X $JAEGER_MODULE/internal/version.latestVersion=$JAEGER_RELEASE" -o "$ctx/jaeger" "$jaeger_pkg")
		cp "$src/jaeger/cmd/jaeger/sampling-strategies.json" "$ctx/"
		cp "$CA_BUNDLE" "$ctx/ca-certificates.crt"
		dbuild "$JAEGER_IMAGE" -- build/images/jaeger/Dockerfile "$ctx"
		echo "images: $JAEGER_IMAGE ($JAEGER_BUILD) from $JAEGER_MODULE@$JAEGER_MODULE_VERSION ($(docker image inspect -f '{{.Size}}' "$JAEGER_IMAGE" | awk '{ printf "%.1f MB", $1 / 1e6 }')): $(since "$t")"
	fi
fi

echo "images: done in $(since "$start") (version $VERSION)"
