# acp-proxy in a container: serves ACP over WebSocket, one agent process per
# connection (`--listen`). The agent runs inside this container, so build your
# agent's image FROM this one (README, "Container", shows one for a Node agent),
# or `pip install` acp-proxy into the agent's image.
#
#   docker build -t acp-proxy .
#   docker run --rm --init -p 8765:8765 -v "$PWD/acp-config:/config:ro" acp-proxy \
#       --config /config/proxy.toml --token-file /config/token \
#       --listen ws://0.0.0.0:8765/acp -- my-agent --acp
# The wheel is built in a stage of its own, with a C compiler for the optional compiled
# run path (setup.py; docs/PERFORMANCE.md); the image itself carries no compiler.
FROM python:3.11-slim AS build
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends gcc libc6-dev >/dev/null \
    && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml setup.py README.md LICENSE /src/
COPY acp_proxy /src/acp_proxy
RUN pip wheel --no-cache-dir --no-deps -w /wheels /src

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY docker/constraints.txt /src/
COPY --from=build /wheels /wheels
# Dependencies at the exact versions in docker/constraints.txt.
RUN pip install -c /src/constraints.txt /wheels/acp_proxy-*.whl && rm -rf /src /wheels

# An unprivileged user; /config is where the config file and token are mounted.
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin acp \
    && mkdir -p /config
VOLUME ["/config"]
USER acp
WORKDIR /home/acp

EXPOSE 8765
ENTRYPOINT ["acp-proxy"]
CMD ["--help"]
