# syntax=docker/dockerfile:1
# Expediter gateway image. Two stages: `deps` installs production dependencies with `npm ci --omit=dev`
# (tsx is a runtime dependency: the gateway runs its TypeScript sources directly, as `npm start` does);
# `runtime` copies node_modules and the sources into a clean image and runs as the unprivileged `node` user.
# Base: Debian 12 (bookworm), because the pinned uWebSockets.js build needs glibc 2.36 and Node 20 (ABI 115).
# Build: docker build -t expediter:0.1.0 .    Run: docker run -p 8080:8080 -v $PWD/config:/etc/expediter:ro \
#   -e GATEWAY_CONFIG=/etc/expediter/demo.yaml -e REDIS_URL=redis://redis:6379 expediter:0.1.0

ARG NODE_IMAGE=node:20.20-bookworm-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# Installed inside the image (not copied from a dev machine) so esbuild's platform binary matches the base.
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM ${NODE_IMAGE} AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    LOG_LEVEL=info \
    GATEWAY_CONFIG=/etc/expediter/gateway.yaml
WORKDIR /app
COPY --from=deps --chown=root:root /app/node_modules ./node_modules
COPY --chown=root:root package.json package-lock.json ./
COPY --chown=root:root src ./src
COPY --chown=root:root workers ./workers
COPY --chown=root:root config ./config
# Sources stay root-owned and read-only to the process; tsx writes its transform cache under /tmp.
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=2s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node is PID 1: src/main.ts handles SIGTERM (drain) and SIGHUP (config reload) itself.
CMD ["node", "--import", "tsx", "src/main.ts"]
