# kubegc image. Node 24 everywhere: development (the `node` devDependency),
# tests, CI and this image. On the project's machines, where nothing can be
# pulled, build it with `npm run image` (root; scripts/image.ts): podman builds
# this file as it is on a node:24-bookworm-slim made locally (mmdebstrap, the
# `node` devDependency's binary, npm) and pushes it to the local node's registry
# as 198.18.0.1:5000/kubegc:dev. Wherever the real base can be pulled:
#   docker build -t kubegc:dev .

FROM node:24-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
# --ignore-scripts: the `node` devDependency downloads a Node binary we do not need here.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY scripts/build.ts ./scripts/
COPY src ./src
# The type check, then the bundle the bin runs too (scripts/build.ts says why).
RUN npm run build \
 && npm prune --omit=dev --ignore-scripts

FROM node:24-bookworm-slim
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
# The base image's unprivileged user; the manifests also set runAsNonRoot.
USER 1000:1000
# Node.js flags: src/runtime-flags.ts says which and why.
ENTRYPOINT ["node", "--max-semi-space-size=4", "dist/cli.js"]
CMD ["--help"]
