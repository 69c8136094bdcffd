# syntax=docker/dockerfile:1
# The segmentstore service image: `segmentstore serve` as a non-root user, data on a volume.
#
#   docker build -t segmentstore/segmentstore:0.1.0 .
#   docker run -p 9090:9090 -v segmentstore-data:/var/lib/segmentstore segmentstore/segmentstore:0.1.0
#
# Two stages: the first builds the project and every dependency into wheels, the second installs
# them offline into a virtual environment, so the image carries no compiler, no pip cache and
# no source tree. The Helm chart (helm/segmentstore) runs this image with a read-only root file
# system: everything the process writes goes to the data volume or /tmp.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# The install extras: `server` is the service, `cluster` its JetStream Tier 1; add `cache` for
# the LMDB cache.
ARG EXTRAS=server,cluster
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY segmentstore ./segmentstore
COPY tier1 ./tier1
COPY tier2 ./tier2
COPY cache ./cache
COPY api ./api
COPY jobs ./jobs
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels ".[${EXTRAS}]"

FROM ${PYTHON_IMAGE}
ARG EXTRAS=server,cluster
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/segmentstore/bin:${PATH}
RUN groupadd --system --gid 10001 segmentstore \
 && useradd --system --uid 10001 --gid 10001 --no-create-home \
        --home-dir /var/lib/segmentstore --shell /usr/sbin/nologin segmentstore \
 && mkdir -p /var/lib/segmentstore \
 && chown 10001:10001 /var/lib/segmentstore
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    python -m venv /opt/segmentstore \
 && /opt/segmentstore/bin/pip install --no-cache-dir --no-index --find-links /wheels "segmentstore[${EXTRAS}]"
USER 10001:10001
WORKDIR /var/lib/segmentstore
VOLUME ["/var/lib/segmentstore"]
EXPOSE 9090
ENTRYPOINT ["segmentstore"]
# Without a settings file: listen on every interface, data in the volume. The chart passes
# `serve --config /etc/segmentstore/segmentstore.yaml` instead.
CMD ["serve", "--host", "0.0.0.0", "--data-dir", "/var/lib/segmentstore"]
