# Serving image: vLLM 0.6.4.post1 (OpenAI-compatible API on port 8080)
# Rendered by trainops from templates/images/serve-vllm.Dockerfile.j2 (`trainops image render`).
# The builder adds the OCI labels (revision, source, created) and the trainops lineage, so
# this text is the same for every commit. Build context: Dockerfile, trainops-files/ (the
# entrypoint and its hooks) and context/ (the project's files after include, exclude and
# .dockerignore).
FROM nvcr.io/nvidia/pytorch:24.10-py3

LABEL dev.trainops.template="serve-vllm" \
      dev.trainops.vllm.version="0.6.4.post1"

# The engine from PyPI, for a base that has Python and CUDA but not the engine.
RUN python3 -m pip install --no-cache-dir "vllm==0.6.4.post1"

ENV PYTHONUNBUFFERED="1" \
    DO_NOT_TRACK="1" \
    HF_HUB_DISABLE_TELEMETRY="1" \
    TRAINOPS_HOOKS_DIR="/opt/trainops/entrypoint.d" \
    VLLM_NO_USAGE_STATS="1"

RUN set -e; \
    if id -u trainops >/dev/null 2>&1; then :; \
    elif command -v useradd >/dev/null 2>&1; then \
        groupadd --non-unique --gid 1000 trainops \
        && useradd --non-unique --uid 1000 --gid 1000 --create-home --shell /bin/sh trainops; \
    elif command -v adduser >/dev/null 2>&1; then \
        addgroup -g 1000 trainops && adduser -D -u 1000 -G trainops -s /bin/sh trainops; \
    else \
        mkdir -p /etc /home/trainops \
        && echo "trainops:x:1000:1000::/home/trainops:/bin/sh" >> /etc/passwd \
        && echo "trainops:x:1000:" >> /etc/group \
        && chown 1000:1000 /home/trainops; \
    fi

COPY trainops-files/ /opt/trainops/
WORKDIR /app
COPY context/ /app/

USER 1000:1000
EXPOSE 8080
ENTRYPOINT ["/opt/trainops/entrypoint.sh", "python3", "-m", "vllm.entrypoints.openai.api_server"]
CMD ["--host", "0.0.0.0", "--port", "8080"]
