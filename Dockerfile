# compressd as one self-contained executable on a slim glibc base.
# Untested here (no Docker engine on the build machine); the binary test proves the executable.
#
#   docker build -t compressd .
#   docker run -p 8080:8080 -v compressd-data:/data compressd
#   read-only root: docker run --read-only --tmpfs /tmp:rw,exec,mode=1777 -p 8080:8080 -v compressd-data:/data compressd
# Docker mounts --tmpfs noexec by default; the runtime cache holds native code, so `exec` is required.

# ---- build: Node 20 (the runtime the executable embeds) + the locked dependencies -------------
FROM node:20-bookworm AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN node build.mjs

# ---- runtime: only the executable (glibc and libstdc++ come with the base) ----------------------
FROM debian:bookworm-slim
RUN groupadd --system --gid 10001 compressd \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin compressd \
 && mkdir -p /data \
 && chown 10001:10001 /data
COPY --from=build /src/dist/compressd /usr/local/bin/compressd
ENV COMPRESSD_DATA_DIR=/data \
    COMPRESSD_CACHE_DIR=/tmp/compressd \
    COMPRESSD_HOST=0.0.0.0 \
    COMPRESSD_PORT=8080
USER 10001:10001
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8080
# No curl in the image: bash's /dev/tcp asks /healthz for its status line.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\nHost: localhost\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["/usr/local/bin/compressd"]
CMD ["serve"]
