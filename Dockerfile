# compressd as one self-contained executable on a slim glibc base. `npm run release` builds this file
# with its x64 executable (EXECUTABLE=prebuilt) and saves the image; test/docker.test.ts loads and runs
# that image on a real Docker engine in `npm test`.
#
#   docker build -t compressd .
#   docker run -p 8080:8080 -v compressd-data:/data compressd
#   read-only root: docker run --read-only --tmpfs /tmp:rw,exec,mode=1777 -p 8080:8080 -v compressd-data:/data compressd
# Docker mounts --tmpfs noexec by default; the runtime cache holds native code, so `exec` is required.
#
# Allocator: the executable carries Debian's jemalloc (libjemalloc2 5.3.0, pinned by SHA256 in
# scripts/jemalloc.mjs) in its runtime tree and re-executes itself onto it at start, with the same PID
# (docs/operating.md, "Memory that comes back"); the image adds nothing for it, so the offline
# `prebuilt` build and the from-source build get the same allocator the same way. The from-source
# build stage fetches that .deb from Debian's archive (or --build-arg DEBIAN_MIRROR=URL).
# `docker run -e COMPRESSD_ALLOCATOR=system …` runs on glibc malloc instead, with MALLOC_ARENA_MAX=2.
# HEIF: the executable also carries Debian's libheif, libde265 and dav1d with a helper program that decodes
# HEIC and AVIF pictures (scripts/heif-decoder.mjs; the .debs pinned there, fetched the same way), and LibRaw
# (with GCC's OpenMP runtime, libjpeg-turbo and Little CMS) with one that develops camera RAW files
# (scripts/raw-decoder.mjs); they need only the base image's glibc, libstdc++ and zlib.
#
# Build arguments:
#   NODE_IMAGE     image of the build stage (Node 24 LTS; any Debian-based Node 24 image will do)
#   RUNTIME_IMAGE  image the executable runs on (glibc ≥ 2.28 and libstdc++)
#   EXECUTABLE     `build` (default): build the executable from this source tree; `prebuilt`: take the file
#                  `compressd` from the build context instead (`npm run release` makes its image so, from a
#                  context of this Dockerfile and the x64 executable it built; BuildKit skips the build stage)
# Behind a TLS-intercepting proxy, hand its CA bundle (PEM) to the build stage's `npm ci` as a
# BuildKit secret; it is read during that step only and stays out of every layer:
#   DOCKER_BUILDKIT=1 docker build --secret id=extra_ca,src=/etc/ssl/certs/ca-certificates.crt -t compressd .
ARG NODE_IMAGE=node:24-bookworm-slim
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG EXECUTABLE=build

# ---- build: the locked dependencies, then build.mjs (it embeds the pinned Node 24 from node_modules) ----
FROM ${NODE_IMAGE} AS build
# A C compiler for the native decoders' helper programs (scripts/native-decoder.mjs), C++ for jpegli's
# (scripts/jpegli.mjs).
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends gcc g++ libc6-dev && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
COPY clients/typescript/package.json clients/typescript/
# npm's download cache is a BuildKit cache mount: it never enters a layer, later builds reuse it, and
# build.mjs finds there the locked tarball of the Node it embeds to compare the binary with.
RUN --mount=type=secret,id=extra_ca --mount=type=cache,target=/root/.npm \
    if [ -s /run/secrets/extra_ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/extra_ca; fi \
 && npm ci --no-audit --no-fund
COPY . .
ARG DEBIAN_MIRROR
RUN --mount=type=cache,target=/root/.npm --mount=type=cache,target=/root/.cache/compressd-build node build.mjs

FROM scratch AS prebuilt
COPY compressd /src/dist/compressd

FROM ${EXECUTABLE} AS executable

# ---- runtime: only the executable (glibc and libstdc++ come with the base) ----------------------
FROM ${RUNTIME_IMAGE}
# useradd dates the account (in /etc/shadow) by SOURCE_DATE_EPOCH when set: `npm run release` gives the
# commit's time, so this layer is the same at every build of a commit.
ARG SOURCE_DATE_EPOCH
RUN groupadd --system --gid 10001 compressd \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin compressd \
 && mkdir -p /data \
 && chown 10001:10001 /data
COPY --from=executable /src/dist/compressd /usr/local/bin/compressd
# Only for glibc malloc (COMPRESSD_ALLOCATOR=system, or where jemalloc cannot load; jemalloc ignores it):
# two arenas instead of 8 per core, which otherwise keep hundreds of MB that libvips' worker threads freed.
ENV MALLOC_ARENA_MAX=2 \
    COMPRESSD_DATA_DIR=/data \
    COMPRESSD_CACHE_DIR=/tmp/compressd \
    COMPRESSD_HOST=0.0.0.0 \
    COMPRESSD_PORT=8080
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
# No curl in the image: bash's /dev/tcp asks /healthz for its status line, on the port the
# container's COMPRESSD_PORT names (a `docker run -e COMPRESSD_PORT=…` included).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/${COMPRESSD_PORT:-8080} && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
# No init in the image: started as PID 1, the executable runs its own in front of itself (src/runtime/init.c),
# so that a stop ends inside Docker's timeout; with `docker run --init` it starts none.
ENTRYPOINT ["/usr/local/bin/compressd"]
CMD ["serve"]
