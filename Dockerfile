# syntax=docker/dockerfile:1
# Dunwall: the release folder (npm run release) on a slim Node image, as a non-root user.
#   docker build -t dunwall .
#   docker run -p 3000:3000 -e DATABASE_URL=... -e DUNWALL_ADMIN_TOKEN=... dunwall

FROM node:20-bookworm-slim AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY . .
RUN npm run release -- --out /release

FROM node:20-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000 DUNWALL_DATA_DIR=/data
WORKDIR /app
COPY --from=build --chown=root:root /release /app
RUN mkdir -p /data && chown node:node /data
USER node
EXPOSE 3000
# Ready once the read model is loaded and while the store answers.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "--max-semi-space-size=8", "dist/src/runtime/server.js"]
