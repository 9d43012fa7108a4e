# adaptlab image for KubeRay: CPU and GPU variants from this one file.
#
#   docker build --build-arg VARIANT=cpu -t REGISTRY/adaptlab:0.1.0 .
#   docker build --build-arg VARIANT=gpu -t REGISTRY/adaptlab-gpu:0.1.0 .
#   docker push REGISTRY/adaptlab:0.1.0 && docker push REGISTRY/adaptlab-gpu:0.1.0
#
# The GPU variant installs torch's CUDA 12.8 wheels (they bring the CUDA runtime); the node
# needs the NVIDIA driver and device plugin. No secrets are baked in: the Ray token and the
# object-storage credentials reach the pods as environment from Kubernetes Secrets.
FROM python:3.11.11-slim-bookworm

ARG VARIANT=cpu
ENV ADAPTLAB_VENV=/opt/adaptlab/venv \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HF_HUB_OFFLINE=1

# KubeRay's head/worker commands use bash and wget (liveness probes)
RUN apt-get update \
    && apt-get install -y --no-install-recommends wget ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 1000 ray \
    && useradd --uid 1000 --gid 1000 --create-home --shell /bin/bash ray

# the project, its study files (jobs/) and the install script; .dockerignore keeps results,
# caches and VCS data out
COPY --chown=1000:1000 pyproject.toml README.md /opt/adaptlab/src/
COPY --chown=1000:1000 platform /opt/adaptlab/src/platform
COPY --chown=1000:1000 jobs /opt/adaptlab/src/jobs
COPY --chown=1000:1000 clusters/install.sh /opt/adaptlab/install.sh

RUN mkdir -p /opt/adaptlab/venv && chown 1000:1000 /opt/adaptlab /opt/adaptlab/venv
USER 1000:1000
RUN /opt/adaptlab/install.sh /opt/adaptlab/src "${VARIANT}"

ENV PATH=/opt/adaptlab/venv/bin:$PATH
WORKDIR /opt/adaptlab/src
