# syntax=docker/dockerfile:1
# Build: compile TypeScript and the browser bundle with all dependencies.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts ./scripts
COPY src ./src
COPY demo ./demo
RUN npm run build && node scripts/demo-runtime-deps.mjs && npm prune --omit=dev

# Run: only what the gateway needs, as a non-root user, under an init process.
FROM node:20-bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV NODE_ENV=production HOST=0.0.0.0 PORT=8080
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --from=build --chown=node:node /app/package.json ./package.json
# The gateway-mode example's configuration and page; mount another file over it to run yours.
COPY --chown=node:node demo/gateway-mode/gateway.yaml ./config/gateway.yaml
COPY --chown=node:node demo/gateway-mode/web ./config/web
USER node
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:8080/readyz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
# tini forwards SIGTERM to node (PID 1 would ignore it) and reaps zombies: the gateway drains and exits 0.
ENTRYPOINT ["/usr/bin/tini", "--"]
# Gateway mode (docs/gateway-mode.md); the demo still runs with: docker run IMAGE node dist/demo/main.js
CMD ["node", "dist/src/cli/main.js", "serve", "--config", "/app/config/gateway.yaml"]
