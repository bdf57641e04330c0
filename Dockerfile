# The platform's image: web, workers and beat all run from it (docker-compose.yml).
# BASE defaults to Debian's Python; any Debian bookworm with python3.11 works. With no registry,
# bin/compose-images builds it FROM a local Debian image (--build-arg BASE=inspector-base:bookworm,
# which already has these packages) with the host's network for pip.
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap python3 python3-venv \
    && rm -rf /var/lib/apt/lists/*
# A virtualenv: Debian's python3 refuses pip installs into the system (PEP 668).
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /app
# .build-ca-certificates.crt: the build host's CA bundle (public certificates), when
# bin/compose-images puts one in the context, so that pip trusts what the build host trusts
# (an HTTPS proxy of its own, say). Optional: without it, the image's own bundle.
COPY requirements.txt .build-ca-certificates.cr[t] /tmp/build/
RUN if [ -f /tmp/build/.build-ca-certificates.crt ]; then \
      export PIP_CERT=/tmp/build/.build-ca-certificates.crt; fi \
    && pip install --no-cache-dir -r /tmp/build/requirements.txt && rm -rf /tmp/build
COPY . .
ENV INSPECTOR_DATA_DIR=/var/lib/inspector PYTHONUNBUFFERED=1
RUN mkdir -p /var/lib/inspector
EXPOSE 8000
CMD ["gunicorn", "inspector.wsgi", "-b", "0.0.0.0:8000", "-w", "4"]
