# resilient-mcp: a small image running the CLI.
#   docker build -t resilient-mcp .
#   docker run -i --rm resilient-mcp wrap -- python -m resilient_mcp.demo.upstream           (stdio)
#   docker run --rm -p 8765:8765 -v $PWD:/cfg resilient-mcp serve --config /cfg/resilient-mcp.yaml --http 0.0.0.0:8765
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY resilient_mcp ./resilient_mcp
RUN pip install --no-cache-dir --prefix=/install ".[redis]"

FROM python:3.11-slim
COPY --from=build /install /usr/local
RUN useradd --create-home --uid 10001 mcp
USER mcp
ENV PYTHONUNBUFFERED=1 XDG_STATE_HOME=/home/mcp/.local/state
VOLUME ["/home/mcp/.local/state"]
ENTRYPOINT ["resilient-mcp"]
CMD ["--help"]
