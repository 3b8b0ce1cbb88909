# syntax=docker/dockerfile:1
# Arbiter container image.
#   docker build -t arbiter:0.1.0 .
#   docker run --rm -p 8080:8080 arbiter:0.1.0
# Stages: build (dev deps, tsc to dist/), deps (production node_modules only), runtime (what runs).
# Node 24 works as well: --build-arg NODE_VERSION=24.
ARG NODE_VERSION=20

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY schemas ./schemas
COPY routes ./routes
COPY src ./src
RUN npm run build

FROM node:${NODE_VERSION}-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
# python3 runs Python environment plugins; tini reaps plugin worker processes and forwards signals;
# util-linux (essential in Debian, named so it stays) has setpriv and chrt for starting workers.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 tini util-linux \
 && rm -rf /var/lib/apt/lists/*
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /app
# Root owns the code (read-only to the service); "type": "module" in package.json is needed at run time.
COPY package.json ./
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# Plugin worker runtimes (worker.py, worker.mjs, digest.py) are not TypeScript, so tsc does not
# emit them; src/kinds/plugin/runtimes.ts finds them here, beside dist/.
COPY src/kinds/plugin/runtime ./src/kinds/plugin/runtime
# The embedded defaults (no ARBITER_PLUGINS_DIR / ARBITER_RUBRICS_DIR set) serve these.
COPY examples ./examples
# The node image's "node" user, by number so Kubernetes runAsNonRoot can verify it.
USER 1000:1000
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["node", "dist/src/server.js"]
