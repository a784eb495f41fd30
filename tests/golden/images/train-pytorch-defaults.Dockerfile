# Training image: PyTorch 2.5.1, CUDA 12.4.1, NCCL 2.21.5, Python 3.11
# Rendered by trainops from templates/images/train-pytorch.Dockerfile.j2 (`trainops image render`).
# The builder adds the OCI labels (revision, source, created) and the trainops lineage, so
# this text is the same for every commit. Build context: Dockerfile, trainops-files/ (the
# entrypoint and its hooks) and context/ (the project's files after include, exclude and
# .dockerignore).
FROM nvidia/cuda:12.4.1-devel-ubuntu22.04

LABEL dev.trainops.cuda.version="12.4.1" \
      dev.trainops.nccl.version="2.21.5" \
      dev.trainops.python.version="3.11" \
      dev.trainops.template="train-pytorch" \
      dev.trainops.torch.version="2.5.1"

# Python in a virtual environment, then PyTorch built for this CUDA and the pinned NCCL.
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates python3.11 python3.11-venv python3.11-dev \
 && rm -rf /var/lib/apt/lists/* \
 && python3.11 -m venv /opt/venv
ENV PATH="/opt/venv/bin:$PATH" VIRTUAL_ENV="/opt/venv"
RUN python3 -m pip install --no-cache-dir --upgrade pip \
 && python3 -m pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cu124 "torch==2.5.1" \
 && python3 -m pip install --no-cache-dir --no-deps "nvidia-nccl-cu12==2.21.5" \
 && python3 -c "import torch; assert torch.__version__.split('+')[0] == '2.5.1', torch.__version__"

# trainops in the image: the checkpoint restore step and the checkpoint sidecar run it.
RUN python3 -m pip install --no-cache-dir "trainops==0.1.0"

# NCCL and torch.distributed defaults; the job (train.nccl, train.env) overrides any of them.
ENV PYTHONUNBUFFERED="1" \
    PYTHONDONTWRITEBYTECODE="1" \
    NCCL_DEBUG="WARN" \
    NCCL_IB_TIMEOUT="22" \
    TORCH_NCCL_ASYNC_ERROR_HANDLING="1" \
    TORCH_DISTRIBUTED_DEBUG="OFF" \
    OMP_NUM_THREADS="1" \
    MASTER_PORT="29500" \
    TRAINOPS_HOOKS_DIR="/opt/trainops/entrypoint.d"

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
WORKDIR /workspace
COPY context/ /workspace/
RUN if [ -f requirements.txt ]; then python3 -m pip install --no-cache-dir -r requirements.txt; fi \
 && if [ -f pyproject.toml ] || [ -f setup.py ]; then python3 -m pip install --no-cache-dir --no-deps -e .; fi

USER 1000:1000
ENTRYPOINT ["/opt/trainops/entrypoint.sh"]
